package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// Every row of the engine table is an --engine that serve takes, that its
// help names and that the dashboard shows by its title; any other is a
// usage error naming them all.
func TestEngineTable(t *testing.T) {
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	_, help, _ := run(t, nil, "serve", "-h")
	titles := map[string]bool{}
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			if eng.check == nil || eng.open == nil || eng.title == "" || titles[eng.title] {
				t.Fatalf("row %+v: want a check, an open and a title of its own", eng)
			}
			titles[eng.title] = true
			cfg, err := m.parseServe([]string{"--engine", eng.name})
			if err != nil || cfg.Engine != eng.name {
				t.Fatalf("--engine %s: %q, %v", eng.name, cfg.Engine, err)
			}
			if got := serverInfo(cfg).Engine; got != eng.title {
				t.Errorf("dashboard's engine %q, want %q", got, eng.title)
			}
			if !strings.Contains(help, eng.name+" (") {
				t.Errorf("--engine's help does not name %s:\n%s", eng.name, help)
			}
		})
	}
	_, err := m.parseServe([]string{"--engine", "nomad"})
	if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "want docker or kubernetes") {
		t.Errorf("--engine nomad: %v, want a usage error naming the engines", err)
	}
}
