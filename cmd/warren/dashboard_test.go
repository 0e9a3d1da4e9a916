package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// TestDashboardPrintsSingleUseLink: the last line is a login URL whose
// token the store knows, for the default team, once.
func TestDashboardPrintsSingleUseLink(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		base string
	}{
		{[]string{"--addr", "127.0.0.1:4321"}, "http://127.0.0.1:4321"},
		{[]string{"--url", "https://warren.example:3443/"}, "https://warren.example:3443"},
	} {
		stdout, _, err := run(t, nil, append([]string{"dashboard", "--state-dir", dir}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		m := regexp.MustCompile(`^` + regexp.QuoteMeta(tc.base) + `/dashboard/login#token=([0-9a-f]{64})$`).FindStringSubmatch(lines[len(lines)-1])
		if m == nil {
			t.Fatalf("last line %q: want a login URL on %s", lines[len(lines)-1], tc.base)
		}
		st, err := sqlite.Open(context.Background(), filepath.Join(dir, "warren.db"))
		if err != nil {
			t.Fatal(err)
		}
		team, err := st.UseDashboardLogin(context.Background(), sandbox.HashAPIKey(m[1]), time.Now())
		if err != nil || team != sandbox.DefaultTeamID {
			t.Errorf("first use: team %q, %v", team, err)
		}
		if _, err := st.UseDashboardLogin(context.Background(), sandbox.HashAPIKey(m[1]), time.Now()); sandbox.KindOf(err) != sandbox.KindUnauthenticated {
			t.Errorf("second use: %v, want unauthenticated", err)
		}
		st.Close()
	}
	if _, _, err := run(t, nil, "dashboard", "--state-dir", dir, "--url", "ftp://x"); err == nil {
		t.Error("--url ftp://x accepted")
	}
}
