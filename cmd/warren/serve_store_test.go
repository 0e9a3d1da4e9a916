package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/warrenhq/warren/internal/runtime/fake"
)

// --store chooses the store by its URL's scheme; anything else is refused
// naming the accepted forms, without the password it may hold.
func TestStoreFor(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "SQLite"},
		{"postgres://warren:hunter2@db:5432/warren?sslmode=require", "PostgreSQL"},
		{"postgresql:///warren?host=/run/postgresql", "PostgreSQL"},
		{"mysql://warren:hunter2@db/warren", ""},
		{"/var/lib/warren/warren.db", ""},
		{"host=db password=hunter2", ""},
	} {
		k, err := storeFor(tc.url)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "postgres:// or postgresql://") || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%q: %v, want an error naming the forms, without the password", tc.url, err)
			}
			continue
		}
		if err != nil || k.name != tc.want {
			t.Errorf("%q: %q %v, want %s", tc.url, k.name, err, tc.want)
		}
	}
	if _, _, err := run(t, map[string]string{"WARREN_STORE": "mysql://db/warren"}, "keys", "list"); err == nil {
		t.Error("keys with WARREN_STORE=mysql://: no error")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://warren:hunter2@db:5432/warren":        "postgres://warren:xxxxx@db:5432/warren",
		"postgres://db/warren?password=hunter2&sslmode=x": "postgres://db/warren?password=xxxxx&sslmode=x",
		"postgresql:///warren?host=/run/postgresql":       "postgresql:///warren?host=/run/postgresql",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
	// Port 1 refuses: the error names the store, never its password.
	_, _, err := openStore(t.Context(), "postgres://warren:hunter2@127.0.0.1:1/warren?connect_timeout=5", t.TempDir())
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "postgres://warren:xxxxx@127.0.0.1:1/warren") {
		t.Errorf("open of a store that refuses: %v", err)
	}
	var log bytes.Buffer
	logStore(slog.New(slog.NewTextHandler(&log, nil)), "postgres://warren:hunter2@db/warren", "/state")
	if strings.Contains(log.String(), "hunter2") || !strings.Contains(log.String(), "PostgreSQL") {
		t.Errorf("log: %s", log.String())
	}
}

// With --store a PostgreSQL URL, keys, dashboard and serve all use that
// database, not the state dir's file: a key made by keys serves, a login
// made by dashboard logs in, and a sandbox outlives a restart on another
// state dir.
func TestServeOnPostgres(t *testing.T) {
	db := testPostgres(t)
	env := map[string]string{"WARREN_STATE_DIR": t.TempDir(), "WARREN_STORE": db}
	stdout, _, err := run(t, env, "keys", "create")
	key := strings.TrimSpace(stdout)
	if err != nil || !strings.HasPrefix(key, "e2b_") {
		t.Fatalf("keys create: %q %v", stdout, err)
	}
	if _, _, err := run(t, env, "dashboard"); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if _, err := os.Stat(env["WARREN_STATE_DIR"] + "/warren.db"); !os.IsNotExist(err) {
		t.Errorf("keys and dashboard made a SQLite file beside --store: %v", err)
	}

	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }}
	rt := fake.New("warren/base")
	base, stop := startServe(t, m, rt)
	code, body := call(t, "POST", base+"/v2/sandboxes", key, `{"templateID":"base","timeout":600}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	stop()

	env["WARREN_STATE_DIR"] = t.TempDir()
	base, stop = startServe(t, m, rt)
	defer stop()
	if code, body := call(t, "GET", base+"/v2/sandboxes", key, ""); code != 200 || !strings.Contains(body, `"sandboxID"`) {
		t.Errorf("list after a restart on another state dir: %d %s", code, body)
	}
}

// call sends an API request with key and returns its status and body.
func call(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("X-API-KEY", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// testPostgres returns the URL of a new database on the server
// WARREN_TEST_POSTGRES names (scripts/ensure-postgres.sh), dropped when
// the test ends; without it the test skips, or fails with CI set.
func testPostgres(t *testing.T) string {
	t.Helper()
	base := os.Getenv("WARREN_TEST_POSTGRES")
	if base == "" {
		msg := "WARREN_TEST_POSTGRES is unset: no PostgreSQL to test against (scripts/ensure-postgres.sh starts one)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; with CI set nothing is skipped")
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("warren_cmd_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
