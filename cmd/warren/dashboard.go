package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/web"
)

func (m *Main) runDashboard(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dashboard", "warren dashboard [flags]",
		"Print a login link to the dashboard of warren serve (at /dashboard/): single-use, for the\n"+
			"default team, valid 10 minutes. Give it the --state-dir (or --store) of the server, and the --addr it\n"+
			"listens on (or --url, e.g. its https:// address under --tls-addr). The link is the last line.")
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var stateDir, storeURL, addr, base string
	e.String(&stateDir, "state-dir", m.defaultStateDir(), "directory of Warren's database")
	addStoreFlag(e, &storeURL)
	e.String(&addr, "addr", "127.0.0.1:3000", "address the server listens on")
	fs.StringVar(&base, "url", "", "the server's base URL (default http://<addr>)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("dashboard takes no arguments, got %q", fs.Args())}
	}
	if base == "" {
		base = "http://" + addr
	}
	base = strings.TrimSuffix(base, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return usageError{fmt.Sprintf("--url=%q: want an http:// or https:// URL", base)}
	}
	st, closeStore, err := openStore(ctx, storeURL, stateDir)
	if err != nil {
		return err
	}
	defer closeStore()
	token, err := web.CreateLogin(ctx, st, sandbox.DefaultTeamID, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "a single-use login link for team %s, valid %s:\n", sandbox.DefaultTeamID, web.LoginTTL)
	fmt.Fprintln(m.Stdout, web.LoginURL(base, token))
	return nil
}
