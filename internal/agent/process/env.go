package process

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agent/users"
)

// user resolves the Basic-auth user of a request, or the default user.
func (s *Service) user(h http.Header) (*users.User, error) {
	u, err := users.ForRequest(h, s.st.DefaultUser())
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	return u, nil
}

// workdir resolves the requested cwd for u; nil means the sandbox default
// workdir, or the home when none is set.
func (s *Service) workdir(u *users.User, cwd *string) (string, error) {
	var dir string
	var err error
	if cwd == nil || *cwd == "" {
		dir, err = u.ResolvePath("", s.st.DefaultWorkdir())
	} else {
		dir, err = u.ResolvePath(*cwd, "")
	}
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid cwd: %w", err))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", dir))
	}
	if !fi.IsDir() {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' is not a directory", dir))
	}
	return dir, nil
}

// defaultPath is used when the agent itself was started without PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environ builds a process environment, each layer overriding the previous:
// the agent's own environment (so an image's ENV reaches commands) without
// Warren's settings, with the trust store's variables where the image sets
// none, the user's identity, the sandbox-wide vars, and the request's vars. It is built fresh per process so nothing leaks.
func (s *Service) environ(u *users.User, request map[string]string) []string {
	env := map[string]string{"PATH": defaultPath}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.HasPrefix(k, "WARREN_") {
			continue
		}
		env[k] = v
	}
	for k, v := range s.st.TrustEnv() {
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	env["HOME"] = u.Home
	env["USER"] = u.Name
	env["LOGNAME"] = u.Name
	env["E2B_SANDBOX"] = "true"
	for k, v := range s.st.EnvVars() {
		if validEnvName(k) && !hasNUL(v) {
			env[k] = v
		}
	}
	for k, v := range request {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}

func hasNUL(s string) bool {
	return strings.IndexByte(s, 0) >= 0
}
