package lifecycle

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Get returns a running or paused sandbox of the team.
func (m *Manager) Get(ctx context.Context, teamID, id string) (sandbox.Sandbox, error) {
	return m.live(teamID, id)
}

// Find returns the ID of a running or paused sandbox, of any team, that
// match accepts: the proxy's way to the sandbox of a request that names
// none but proves which it is for (a /files URL signed with its access
// token). On the leader match runs under the read lock of the sandboxes
// it knows, so it must be quick and call nothing of the Manager; a
// follower reads them from the store. NotFound when none matches.
func (m *Manager) Find(ctx context.Context, match func(sandbox.Sandbox) bool) (string, error) {
	live := func(sb sandbox.Sandbox) bool {
		return (sb.State == sandbox.StateRunning || sb.State == sandbox.StatePaused) && match(sb)
	}
	if m.following.Load() {
		sbs, err := m.cfg.Store.ListSandboxes(ctx, sandbox.SandboxFilter{States: []sandbox.State{sandbox.StateRunning, sandbox.StatePaused}})
		if err != nil {
			return "", err
		}
		if i := slices.IndexFunc(sbs, live); i >= 0 {
			return sbs[i].ID, nil
		}
	} else {
		m.mu.RLock()
		defer m.mu.RUnlock()
		for id, sb := range m.sandboxes {
			if live(sb) {
				return id, nil
			}
		}
	}
	return "", sandbox.Errorf(sandbox.KindNotFound, "no sandbox matches")
}

// ListRequest filters and pages Manager.List.
type ListRequest struct {
	TeamID string
	// States keeps sandboxes in any of these states; empty = running and
	// paused. Only running and paused sandboxes are ever listed.
	States []sandbox.State
	// Metadata keeps sandboxes whose metadata has every pair.
	Metadata     map[string]string
	Template     string    // keeps sandboxes of this template ID or alias; "" = any
	StartedAfter time.Time // zero = any
	Descending   bool      // newest first; default oldest first
	Limit        int       // page size; 0 = everything
	NextToken    string    // from the previous page; "" = first page
}

// List returns a page of the team's sandboxes, ordered by start time then
// ID, and the token of the next page ("" when this is the last).
func (m *Manager) List(ctx context.Context, req ListRequest) ([]sandbox.Sandbox, string, error) {
	states := req.States
	if len(states) == 0 {
		states = []sandbox.State{sandbox.StateRunning, sandbox.StatePaused}
	}
	var after *cursor
	if req.NextToken != "" {
		c, err := parseCursor(req.NextToken)
		if err != nil {
			return nil, "", err
		}
		after = &c
	}
	if m.following.Load() {
		if err := m.readAll(ctx); err != nil {
			return nil, "", err
		}
	}
	// Only the page is copied out: the matches are sorted by their
	// cursors, small, rather than as whole records (bench/idle lists 500).
	m.mu.RLock()
	defer m.mu.RUnlock()
	var keys []cursor
	for _, sb := range m.sandboxes {
		if sb.TeamID != req.TeamID || !slices.Contains(states, sb.State) ||
			sb.State == sandbox.StateCreating || sb.State == sandbox.StateKilled {
			continue
		}
		if req.Template != "" && sb.TemplateID != req.Template && sb.Alias != req.Template {
			continue
		}
		if !req.StartedAfter.IsZero() && !sb.StartedAt.After(req.StartedAfter) {
			continue
		}
		if !hasMetadata(sb.Metadata, req.Metadata) {
			continue
		}
		c := cursorOf(sb)
		if after != nil {
			o := c.compare(*after)
			if (!req.Descending && o <= 0) || (req.Descending && o >= 0) {
				continue
			}
		}
		keys = append(keys, c)
	}
	slices.SortFunc(keys, func(a, b cursor) int {
		if req.Descending {
			return b.compare(a)
		}
		return a.compare(b)
	})
	next := ""
	if req.Limit > 0 && len(keys) > req.Limit {
		keys = keys[:req.Limit]
		next = keys[len(keys)-1].String()
	}
	out := make([]sandbox.Sandbox, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.sandboxes[k.id])
	}
	return out, next, nil
}

func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// cursor is a position in the list order, opaque to clients.
type cursor struct {
	started int64 // unix nanoseconds
	id      string
}

func cursorOf(sb sandbox.Sandbox) cursor { return cursor{sb.StartedAt.UnixNano(), sb.ID} }

func (c cursor) compare(o cursor) int {
	return cmp.Or(cmp.Compare(c.started, o.started), strings.Compare(c.id, o.id))
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s", c.started, c.id))
}

func parseCursor(s string) (cursor, error) {
	bad := sandbox.Errorf(sandbox.KindInvalid, "invalid next token")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, bad
	}
	ts, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, bad
	}
	return cursor{n, id}, nil
}

// Metrics returns a sandbox's samples with from <= time <= to (zero =
// open), oldest first.
func (m *Manager) Metrics(ctx context.Context, teamID, id string, from, to time.Time) ([]sandbox.Stats, error) {
	if _, err := m.live(teamID, id); err != nil {
		return nil, err
	}
	return m.cfg.Store.Metrics(ctx, id, from, to)
}

// LatestMetrics returns the newest sample of each of the team's given
// sandboxes that has one; unknown IDs are left out.
func (m *Manager) LatestMetrics(ctx context.Context, teamID string, ids []string) (map[string]sandbox.Stats, error) {
	out := map[string]sandbox.Stats{}
	since := time.Now().Add(-2 * m.cfg.MetricsInterval)
	for _, id := range ids {
		if _, err := m.live(teamID, id); err != nil {
			continue
		}
		st, err := m.cfg.Store.Metrics(ctx, id, since, time.Time{})
		if err != nil {
			return nil, err
		}
		if len(st) > 0 {
			out[id] = st[len(st)-1]
		}
	}
	return out, nil
}
