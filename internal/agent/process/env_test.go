package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/users"
	"github.com/warrenhq/warren/internal/warrentest"
	"github.com/warrenhq/warren/proto/process"
)

// Not parallel: it sets the agent's own environment.
func TestEnvLayering(t *testing.T) {
	t.Setenv("IMAGE_ENV", "from-image")
	t.Setenv("WARREN_SECRET", "must-not-leak")
	t.Setenv("LAYER", "agent")
	h := newHarness(t)
	h.st.SetEnvVars(map[string]string{"LAYER": "sandbox", "SANDBOX_ONLY": "s"})
	u, err := users.Lookup(h.st.DefaultUser())
	if err != nil {
		t.Fatal(err)
	}

	show := `echo "IMAGE_ENV=$IMAGE_ENV WARREN_SECRET=${WARREN_SECRET-unset} LAYER=$LAYER SANDBOX_ONLY=$SANDBOX_ONLY REQ=${REQ-unset}"; echo "HOME=$HOME USER=$USER LOGNAME=$LOGNAME E2B_SANDBOX=$E2B_SANDBOX"; test -n "$PATH"`
	identity := "HOME=" + u.Home + " USER=" + u.Name + " LOGNAME=" + u.Name + " E2B_SANDBOX=true\n"
	tests := []struct {
		name string
		envs map[string]string
		want string
	}{
		{
			name: "sandbox vars override the agent's",
			want: "IMAGE_ENV=from-image WARREN_SECRET=unset LAYER=sandbox SANDBOX_ONLY=s REQ=unset\n" + identity,
		},
		{
			name: "request vars override the sandbox's",
			envs: map[string]string{"LAYER": "request", "REQ": "r", "USER": "spoofed"},
			want: "IMAGE_ENV=from-image WARREN_SECRET=unset LAYER=request SANDBOX_ONLY=s REQ=r\n" +
				strings.Replace(identity, "USER="+u.Name, "USER=spoofed", 1),
		},
		{
			name: "request vars do not leak into the next command",
			want: "IMAGE_ENV=from-image WARREN_SECRET=unset LAYER=sandbox SANDBOX_ONLY=s REQ=unset\n" + identity,
		},
	}
	for _, tt := range tests { // in order: the last checks what the second left behind
		t.Run(tt.name, func(t *testing.T) {
			req := bash(show)
			req.Process.Envs = tt.envs
			r := h.run(t, req)
			if r.stdout != tt.want || r.end.GetExitCode() != 0 {
				t.Errorf("got %q (exit %d, stderr %q), want %q", r.stdout, r.end.GetExitCode(), r.stderr, tt.want)
			}
		})
	}
}

func TestCwd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u, err := users.Lookup(h.st.DefaultUser())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cwd     *string
		workdir string // sandbox default workdir
		want    string
		errMsg  string
	}{
		{name: "none means home", want: u.Home},
		{name: "empty means home", cwd: new(""), want: u.Home},
		{name: "none means the default workdir", workdir: dir, want: dir},
		{name: "tilde", cwd: new("~"), workdir: dir, want: u.Home},
		{name: "dot is the home", cwd: new("."), want: u.Home},
		{name: "absolute", cwd: &dir, workdir: "/", want: dir},
		{name: "nonexistent", cwd: new(filepath.Join(dir, "nope")), errMsg: "cwd '" + filepath.Join(dir, "nope") + "' does not exist"},
		{name: "relative nonexistent", cwd: new("no-such-dir-here"), errMsg: "cwd '" + filepath.Join(u.Home, "no-such-dir-here") + "' does not exist"},
		{name: "a file", cwd: &file, errMsg: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.st.SetDefaultWorkdir(tt.workdir)
			req := bash("pwd")
			req.Process.Cwd = tt.cwd
			if tt.errMsg != "" {
				r := collect(t, h.start(t, t.Context(), req))
				wantCode(t, r.err, connect.CodeInvalidArgument, tt.errMsg)
				return
			}
			if r := h.run(t, req); r.stdout != tt.want+"\n" {
				t.Errorf("pwd = %q, want %q", r.stdout, tt.want)
			}
		})
	}
}

func TestUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		auth        string // Authorization header; "" sends none
		defaultUser string
		needsRoot   bool
		want        string
		code        connect.Code
		errMsg      string
	}{
		{name: "unknown user", auth: basicAuth("no-such-user-xyz"), code: connect.CodeUnauthenticated, errMsg: "invalid username: 'no-such-user-xyz'"},
		{name: "unknown default user", defaultUser: "no-such-user-xyz", code: connect.CodeUnauthenticated, errMsg: "invalid username: 'no-such-user-xyz'"},
		{name: "malformed basic auth", auth: "Basic !!!", code: connect.CodeUnauthenticated, errMsg: "basic auth"},
		{name: "basic auth user", auth: basicAuth("nobody"), needsRoot: true, want: "65534 65534 nobody /nonexistent\n"},
		{name: "default user", defaultUser: "nobody", needsRoot: true, want: "65534 65534 nobody /nonexistent\n"},
		{name: "basic auth beats the default", auth: basicAuth("root"), defaultUser: "nobody", needsRoot: true, want: "0 0 root /root\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.needsRoot {
				warrentest.RequireRoot(t, "it runs processes as another user")
				if _, err := users.Lookup("nobody"); err != nil {
					t.Skip("no user nobody in this system")
				}
			}
			h := newHarness(t)
			h.st.SetDefaultUser(tt.defaultUser)
			req := bash("echo $(id -u) $(id -g) $(id -un) $HOME")
			req.Process.Cwd = new("/")
			var header []string
			if tt.auth != "" {
				header = []string{"Authorization", tt.auth}
			}
			if tt.errMsg != "" {
				r := collect(t, h.start(t, t.Context(), req, header...))
				wantCode(t, r.err, tt.code, tt.errMsg)
				return
			}
			if r := h.run(t, req, header...); r.stdout != tt.want {
				t.Errorf("got %q (stderr %q), want %q", r.stdout, r.stderr, tt.want)
			}
		})
	}
}

// The PTY path sets credentials too: an interactive shell of another user
// must not be root.
func TestUserPTY(t *testing.T) {
	t.Parallel()
	warrentest.RequireRoot(t, "it runs processes as another user")
	if _, err := users.Lookup("nobody"); err != nil {
		t.Skip("no user nobody in this system")
	}
	h := newHarness(t)
	req := bash("id -u")
	req.Process.Cwd = new("/")
	req.Pty = &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}
	if r := h.run(t, req, "Authorization", basicAuth("nobody")); strings.TrimSpace(r.pty) != "65534" {
		t.Errorf("id -u in a pty = %q, want 65534", r.pty)
	}
}
