package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

const keysUsage = `Usage: warren keys <create|list|revoke> [flags]

Subcommands:
  create [--name N] [--team T]   make an API key and print it (shown only once)
  list                           list keys (masked)
  revoke KEY_ID                  delete a key

Keys live in the store: the state directory's database (--state-dir, env
WARREN_STATE_DIR), or the PostgreSQL database of --store (env WARREN_STORE) when the
server has one; a running server sees changes at once.`

func (m *Main) runKeys(ctx context.Context, args []string) error {
	sub, rest, err := m.subcommand(args, "keys", keysUsage, "create, list or revoke")
	if sub == "" {
		return err
	}
	fs := m.newFlagSet("keys "+sub, "warren keys "+sub+" [flags]", keysUsage)
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var stateDir, storeURL, name, team string
	e.String(&stateDir, "state-dir", m.defaultStateDir(), "directory of Warren's database")
	addStoreFlag(e, &storeURL)
	switch sub {
	case "create":
		fs.StringVar(&name, "name", "", "a name to recognise the key by")
		fs.StringVar(&team, "team", sandbox.DefaultTeamID, "team the key belongs to (created if new)")
	case "list", "revoke":
	default:
		fmt.Fprintln(m.Stderr, keysUsage)
		return usageError{fmt.Sprintf("unknown keys subcommand %q", sub)}
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	if want := map[string]int{"create": 0, "list": 0, "revoke": 1}[sub]; fs.NArg() != want {
		return usageError{fmt.Sprintf("keys %s takes %d argument(s), got %q", sub, want, fs.Args())}
	}
	st, closeStore, err := openStore(ctx, storeURL, stateDir)
	if err != nil {
		return err
	}
	defer closeStore()
	switch sub {
	case "create":
		return m.createKey(ctx, st, name, team)
	case "list":
		return m.listKeys(ctx, st)
	default:
		if err := st.DeleteAPIKey(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "revoked %s\n", fs.Arg(0))
		return nil
	}
}

func (m *Main) createKey(ctx context.Context, st store.Store, name, team string) error {
	if _, err := st.GetTeam(ctx, team); sandbox.KindOf(err) == sandbox.KindNotFound {
		if err := st.PutTeam(ctx, sandbox.Team{ID: team, Name: team, CreatedAt: time.Now().UTC()}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	key, k := sandbox.MakeAPIKey(team, name, time.Now())
	if err := st.CreateAPIKey(ctx, k); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, key)
	fmt.Fprintf(m.Stderr, "created key %s for team %s; it is not shown again\n", k.ID, team)
	return nil
}

func (m *Main) listKeys(ctx context.Context, st store.Store) error {
	keys, err := st.ListAPIKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTEAM\tKEY\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.TeamID, k.Mask, k.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// subcommand splits args of the command name into its subcommand and the
// rest. With none, or asked for help, it prints usage and returns sub ""
// with the error to return: a usage error naming subs when none was given.
func (m *Main) subcommand(args []string, name, usage, subs string) (sub string, rest []string, err error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintln(m.Stdout, usage)
		if len(args) == 0 {
			return "", nil, usageError{name + " needs a subcommand: " + subs}
		}
		return "", nil, nil
	}
	return args[0], args[1:], nil
}
