package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func run(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	err = m.Run(t.Context(), args)
	return out.String(), errOut.String(), err
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantUsage bool // a usageError
		wantOut   string
	}{
		{name: "no args", args: nil, wantUsage: true},
		{name: "unknown command", args: []string{"frobnicate"}, wantUsage: true},
		{name: "help", args: []string{"help"}, wantOut: "Commands:\n  image"},
		{name: "help image", args: []string{"help", "image"}, wantOut: "warren image build"},
		{name: "image without subcommand", args: []string{"image"}, wantUsage: true},
		{name: "image unknown subcommand", args: []string{"image", "pull"}, wantUsage: true},
		{name: "image build extra argument", args: []string{"image", "build", "now"}, wantUsage: true},
		{name: "image build unknown image", args: []string{"image", "build", "python"}, wantUsage: true},
		{name: "image build code-interpreter extra argument", args: []string{"image", "build", "code-interpreter", "now"}, wantUsage: true},
		{name: "image build unknown flag", args: []string{"image", "build", "--fast"}, wantUsage: true},
		{name: "image build bad mirror", args: []string{"image", "build", "--mirror", "deb.example/debian"}, wantUsage: true},
		// Refused before any rule is written (these tests run on the host's own network).
		{name: "node isolate bad network", args: []string{"node", "isolate", "--refuse", "10.0.0.0/8,nowhere"}, wantUsage: true},
		{name: "node isolate bad port", args: []string{"node", "isolate", "--agent-port", "70000"}, wantUsage: true},
		{name: "node isolate bad neighbour", args: []string{"node", "isolate", "--reaches", "10.0.0.7,10.0.0.0/8"}, wantUsage: true},
		{name: "node isolate bad backend", args: []string{"node", "isolate", "--backend", "pf"}, wantUsage: true},
		{name: "version", args: []string{"version"}, wantOut: "warren "},
		{name: "version extra argument", args: []string{"version", "x"}, wantUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, nil, tt.args...)
			if got := errors.As(err, new(usageError)); got != tt.wantUsage {
				t.Fatalf("Run(%q) = %v; usage error %v, want %v", tt.args, err, got, tt.wantUsage)
			}
			if !tt.wantUsage && err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("Run(%q) = %v", tt.args, err)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("Run(%q) printed %q, want it to contain %q", tt.args, out, tt.wantOut)
			}
		})
	}
}

func TestParseImageBuild(t *testing.T) {
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string {
		return map[string]string{"WARREN_DEBIAN_MIRROR": "http://env.example/debian"}[k]
	}}
	cfg, err := m.parseImageBuild(nil)
	if err != nil || cfg.Mirror != "http://env.example/debian" || cfg.Tag != "warren/base" || cfg.Force {
		t.Errorf("defaults: %+v, %v; want mirror from WARREN_DEBIAN_MIRROR, tag warren/base", cfg, err)
	}
	cfg, err = m.parseImageBuild([]string{"--force", "--mirror", "https://flag.example/debian", "--tag", "x/y:z", "--cache-dir", "/c"})
	if err != nil || cfg.Mirror != "https://flag.example/debian" || cfg.Tag != "x/y:z" || !cfg.Force || cfg.CacheDir != "/c" {
		t.Errorf("flags: %+v, %v; flags must win over the environment", cfg, err)
	}
}

// Flags may follow the arguments, as in "warren keys revoke ID --state-dir
// DIR"; after "--" everything is an argument.
func TestParseFlagsInterspersed(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		wantDir  string
		wantArgs []string
	}{
		{[]string{"ID", "--state-dir", "/s"}, "/s", []string{"ID"}},
		{[]string{"--state-dir=/s", "a", "b"}, "/s", []string{"a", "b"}},
		{[]string{"a", "--state-dir", "/s", "b"}, "/s", []string{"a", "b"}},
		{[]string{"a", "--", "--state-dir", "/s"}, "", []string{"a", "--state-dir", "/s"}},
		{nil, "", nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		dir := fs.String("state-dir", "", "")
		if err := parseFlags(fs, tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if *dir != tt.wantDir || strings.Join(fs.Args(), " ") != strings.Join(tt.wantArgs, " ") {
			t.Errorf("%q: state-dir %q args %q; want %q and %q", tt.args, *dir, fs.Args(), tt.wantDir, tt.wantArgs)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	if err := parseFlags(fs, []string{"ID", "--nope"}); !errors.As(err, new(usageError)) {
		t.Errorf("an unknown flag after an argument: %v, want a usage error", err)
	}
}
