package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/web"
)

const teamsUsage = `Usage: warren teams <set|list|show|kill|drain> [flags]

Subcommands:
  set TEAM [--max-sandboxes N] [--max-vcpus N] [--max-memory-mb N] [--max-disk-mb N]
           [--max-creates-per-second R] [--max-volumes N] [--max-volume-mb N]
                       set a team's limits (created if new): N, 0 for no limit, or
                       default for the server's (warren serve --team-max-*); limits
                       not named stay as they are
  list                 every team: what it holds and its limits
  show TEAM            one team's use and limits
  kill TEAM            kill every sandbox of a team, on the running server
  drain on|off|status  refuse new creates (503) while serving what runs, on the
                       running server

Quotas live in the store: the state directory's database (--state-dir, env
WARREN_STATE_DIR), or the PostgreSQL database of --store (env WARREN_STORE); a
running server holds a change from its next create. Running and frozen
sandboxes count; those paused to disk do not. kill and drain reach the server
at --addr (or --url) as its operator, with a login made in the store; so do
set, list and show given --url, and then list and show say what the server
counts and the limits in effect there.`

func (m *Main) runTeams(ctx context.Context, args []string) error {
	sub, rest, err := m.subcommand(args, "teams", teamsUsage, "set, list, show, kill or drain")
	if sub == "" {
		return err
	}
	fs := m.newFlagSet("teams "+sub, "warren teams "+sub+" [flags]", teamsUsage)
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var stateDir, storeURL, addr, base string
	e.String(&stateDir, "state-dir", m.defaultStateDir(), "directory of Warren's database")
	addStoreFlag(e, &storeURL)
	q := quotaFlags{}
	want := 0
	switch sub {
	case "set":
		q.define(fs)
		want = 1
	case "show", "kill", "drain":
		want = 1
	case "list":
	default:
		fmt.Fprintln(m.Stderr, teamsUsage)
		return usageError{fmt.Sprintf("unknown teams subcommand %q", sub)}
	}
	if sub == "kill" || sub == "drain" {
		e.String(&addr, "addr", "127.0.0.1:3000", "address the server listens on")
		fs.StringVar(&base, "url", "", "the server's base URL (default http://<addr>)")
	} else {
		fs.StringVar(&base, "url", "", "go through the running server at this base URL (http:// or https://) as its operator, instead of the store alone")
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	if fs.NArg() != want {
		return usageError{fmt.Sprintf("teams %s takes %d argument(s), got %q", sub, want, fs.Args())}
	}
	if sub == "drain" && !map[string]bool{"on": true, "off": true, "status": true}[fs.Arg(0)] {
		return usageError{fmt.Sprintf("teams drain takes on, off or status, not %q", fs.Arg(0))}
	}
	if base != "" && !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return usageError{fmt.Sprintf("--url=%q: want an http:// or https:// URL", base)}
	}
	st, closeStore, err := openStore(ctx, storeURL, stateDir)
	if err != nil {
		return err
	}
	defer closeStore()
	if base == "" {
		switch sub {
		case "set":
			return m.setQuota(ctx, st, fs.Arg(0), q)
		case "list":
			return m.listTeams(ctx, st, "")
		case "show":
			return m.listTeams(ctx, st, fs.Arg(0))
		}
		base = "http://" + addr
	}
	op, err := operatorLogin(ctx, st, strings.TrimSuffix(base, "/"))
	if err != nil {
		return err
	}
	switch sub {
	case "set":
		return m.setQuotaAt(ctx, op, fs.Arg(0), q)
	case "list":
		return m.listTeamsAt(ctx, op, "")
	case "show":
		return m.listTeamsAt(ctx, op, fs.Arg(0))
	}
	if sub == "kill" {
		var out struct{ Killed int }
		if err := op.do(ctx, "POST", "/dashboard/api/operator/teams/"+fs.Arg(0)+"/kill", nil, &out); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "killed %d sandbox(es) of team %s\n", out.Killed, fs.Arg(0))
		return nil
	}
	var d struct{ Draining bool }
	if fs.Arg(0) == "status" {
		err = op.do(ctx, "GET", "/dashboard/api/operator/drain", nil, &d)
	} else {
		err = op.do(ctx, "PUT", "/dashboard/api/operator/drain", map[string]bool{"draining": fs.Arg(0) == "on"}, &d)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, map[bool]string{true: "draining: new creates are refused", false: "serving: creates are taken"}[d.Draining])
	return nil
}

// quotaFlags are the limits `teams set` changes: a flag given sets its
// field (nil for "default"), one not given leaves it.
type quotaFlags map[string]*quotaFlag

type quotaFlag struct {
	set   bool
	float bool
	value *float64 // nil = the server's default
}

func (f *quotaFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	if f.value == nil {
		return "default"
	}
	return strconv.FormatFloat(*f.value, 'g', -1, 64)
}

func (f *quotaFlag) Set(s string) error {
	f.set = true
	if s == "default" {
		f.value = nil
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || (!f.float && v != float64(int(v))) {
		return fmt.Errorf("want %s, 0 for no limit, or default", map[bool]string{true: "a rate", false: "a whole number"}[f.float])
	}
	f.value = &v
	return nil
}

// define adds the flags to fs.
func (q quotaFlags) define(fs *flag.FlagSet) {
	for _, f := range []struct {
		name, usage string
		float       bool
	}{
		{"max-sandboxes", "sandboxes running or frozen at once", false},
		{"max-vcpus", "vCPUs of those sandboxes in all", false},
		{"max-memory-mb", "MiB of memory of those sandboxes in all", false},
		{"max-disk-mb", "MiB of disk of those sandboxes in all", false},
		{"max-creates-per-second", "sandboxes started a second (a second's worth at once)", true},
		{"max-volumes", "volumes", false},
		{"max-volume-mb", "MiB of volumes in all", false},
	} {
		q[f.name] = &quotaFlag{float: f.float}
		fs.Var(q[f.name], f.name, f.usage+": N, 0 for no limit, or default")
	}
}

// apply changes quota by the flags given.
func (q quotaFlags) apply(quota *sandbox.Quota) {
	ints := map[string]**int{"max-sandboxes": &quota.MaxSandboxes, "max-vcpus": &quota.MaxVCPUs, "max-memory-mb": &quota.MaxMemoryMB,
		"max-disk-mb": &quota.MaxDiskMB, "max-volumes": &quota.MaxVolumes, "max-volume-mb": &quota.MaxVolumeMB}
	for name, f := range q {
		if !f.set {
			continue
		}
		if name == "max-creates-per-second" {
			quota.MaxCreatesPerSecond = f.value
			continue
		}
		var v *int
		if f.value != nil {
			n := int(*f.value)
			v = &n
		}
		*ints[name] = v
	}
}

func (m *Main) setQuota(ctx context.Context, st store.Store, team string, q quotaFlags) error {
	t, err := st.GetTeam(ctx, team)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		t = sandbox.Team{ID: team, Name: team, CreatedAt: time.Now().UTC()}
		err = st.PutTeam(ctx, t)
	}
	if err != nil {
		return err
	}
	q.apply(&t.Quota)
	if err := st.SetTeamQuota(ctx, team, t.Quota); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "team %s: %s\n", team, describeQuota(t.Quota))
	return nil
}

// describeQuota says a quota's fields, "default" for those it leaves to
// the server.
func describeQuota(q sandbox.Quota) string {
	n := func(v *int) string {
		switch {
		case v == nil:
			return "default"
		case *v == 0:
			return "unlimited"
		}
		return strconv.Itoa(*v)
	}
	rate := "default"
	if r := q.MaxCreatesPerSecond; r != nil {
		rate = map[bool]string{true: "unlimited", false: strconv.FormatFloat(*r, 'g', -1, 64) + "/s"}[*r == 0]
	}
	return fmt.Sprintf("sandboxes %s, vcpus %s, memory-mb %s, disk-mb %s, creates %s, volumes %s, volume-mb %s",
		n(q.MaxSandboxes), n(q.MaxVCPUs), n(q.MaxMemoryMB), n(q.MaxDiskMB), rate, n(q.MaxVolumes), n(q.MaxVolumeMB))
}

// listTeams prints every team (or only one) with what it holds, as the
// store has it, and its quota.
func (m *Main) listTeams(ctx context.Context, st store.Store, only string) error {
	teams, err := st.ListTeams(ctx)
	if err != nil {
		return err
	}
	sbs, err := st.ListSandboxes(ctx, sandbox.SandboxFilter{TeamID: only, States: []sandbox.State{sandbox.StateRunning, sandbox.StatePaused}})
	if err != nil {
		return err
	}
	use := map[string]sandbox.Usage{}
	for _, sb := range sbs {
		if sb.Holds() {
			use[sb.TeamID] = use[sb.TeamID].Add(sb.CPUCount, sb.MemoryMB, sb.DiskSizeMB)
		}
	}
	vols, err := st.ListAllVolumes(ctx)
	if err != nil {
		return err
	}
	nvols := map[string]int{}
	for _, v := range vols {
		nvols[v.TeamID]++
	}
	rows := make([]teamRow, len(teams))
	for i, t := range teams {
		rows[i] = teamRow{id: t.ID, use: use[t.ID], rest: fmt.Sprintf("%d\t%s", nvols[t.ID], describeQuota(t.Quota))}
	}
	return writeTeams(m.Stdout, "VOLUMES\tQUOTA", rows, only)
}

// teamRow is a line of a teams table: a team, what it holds, and the
// table's own columns after that (tab-separated).
type teamRow struct {
	id   string
	use  sandbox.Usage
	rest string
}

// writeTeams writes rows (only the team only, when set) as a table whose
// last columns are named by rest.
func writeTeams(w io.Writer, rest string, rows []teamRow, only string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEAM\tSANDBOXES\tVCPUS\tMEMORY MIB\tDISK MIB\t"+rest)
	found := false
	for _, r := range rows {
		if only != "" && r.id != only {
			continue
		}
		found = true
		u := r.use
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.id, u.Sandboxes, u.VCPUs, u.MemoryMB, u.DiskMB, r.rest)
	}
	if only != "" && !found {
		return sandbox.Errorf(sandbox.KindNotFound, "team '%s' not found", only)
	}
	return tw.Flush()
}

// serverTeam is a team as the operator API (internal/web) answers it.
type serverTeam struct {
	ID     string
	Usage  sandbox.Usage
	Limits sandbox.Limits
	Quota  sandbox.Quota
}

// setQuotaAt is setQuota through the server at op: the team's quota as
// the server has it, changed by the flags given, put back.
func (m *Main) setQuotaAt(ctx context.Context, op *operatorClient, team string, q quotaFlags) error {
	var teams []serverTeam
	if err := op.do(ctx, "GET", "/dashboard/api/operator/teams", nil, &teams); err != nil {
		return err
	}
	var quota sandbox.Quota
	for _, t := range teams {
		if t.ID == team {
			quota = t.Quota
		}
	}
	q.apply(&quota)
	var t serverTeam
	if err := op.do(ctx, "PUT", "/dashboard/api/operator/teams/"+url.PathEscape(team)+"/quota", quota, &t); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "team %s: %s; in effect: %s\n", team, describeQuota(t.Quota), t.Limits)
	return nil
}

// listTeamsAt prints every team (or only one) as the server at op counts
// it, with the limits in effect there.
func (m *Main) listTeamsAt(ctx context.Context, op *operatorClient, only string) error {
	var teams []serverTeam
	if err := op.do(ctx, "GET", "/dashboard/api/operator/teams", nil, &teams); err != nil {
		return err
	}
	rows := make([]teamRow, len(teams))
	for i, t := range teams {
		rows[i] = teamRow{id: t.ID, use: t.Usage, rest: t.Limits.String()}
	}
	return writeTeams(m.Stdout, "LIMITS", rows, only)
}

// operatorClient calls the running server's operator API with a session
// of its own.
type operatorClient struct {
	base, csrf string
	cookie     *http.Cookie // the session's
}

// operatorLogin logs in to the server at base with a single-use login
// made in its store: the operator's session.
func operatorLogin(ctx context.Context, st store.Store, base string) (*operatorClient, error) {
	token, err := web.CreateLogin(ctx, st, sandbox.DefaultTeamID, time.Now())
	if err != nil {
		return nil, err
	}
	op := &operatorClient{base: base}
	var session struct {
		CSRFToken string
	}
	res, err := op.send(ctx, "POST", "/dashboard/api/login", map[string]string{"token": token}, &session)
	if err != nil {
		return nil, err
	}
	for _, c := range res.Cookies() {
		if c.Name == web.CookieName || c.Name == web.HostCookieName {
			op.cookie = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	if op.cookie == nil {
		return nil, fmt.Errorf("the server at %s gave no session", base)
	}
	op.csrf = session.CSRFToken
	return op, nil
}

func (op *operatorClient) do(ctx context.Context, method, path string, body, out any) error {
	_, err := op.send(ctx, method, path, body, out)
	return err
}

func (op *operatorClient) send(ctx context.Context, method, path string, body, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, op.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if op.cookie != nil {
		req.AddCookie(op.cookie)
		req.Header.Set(web.CSRFHeader, op.csrf)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the server at %s: %w", op.base, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode >= 300 {
		var e httpedge.Body
		json.Unmarshal(b, &e)
		return nil, sandbox.Errorf(httpedge.KindOf(res.StatusCode), "the server answered %d: %s", res.StatusCode, e.Message)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("the server's answer: %w", err)
		}
	}
	return res, nil
}
