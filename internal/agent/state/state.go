// Package state holds the agent's sandbox-wide settings: what the server
// configured through POST /init (env vars, access token, default user and
// workdir). It owns no I/O; the HTTP layer decides when settings change.
package state

import (
	"cmp"
	"maps"
	"sync"
	"time"
)

// Version is the envd version the agent reports. The SDK unlocks features
// by comparing against it, so it must be valid semver and at least 0.6.4.
const Version = "0.6.13"

// State is safe for concurrent use.
type State struct {
	mu             sync.RWMutex
	envVars        map[string]string // guarded by mu; replaced whole by /init
	accessToken    string            // guarded by mu; empty means no token is enforced
	defaultUser    string            // guarded by mu; "root" until /init sets it
	defaultWorkdir string            // guarded by mu; empty means the user's home
	lastTimestamp  time.Time         // guarded by mu; newest clock sync applied
	trustEnv       map[string]string // guarded by mu; variables pointing tools at the trust store
}

// New returns the settings of an agent that has not been initialised yet.
func New() *State {
	return &State{envVars: map[string]string{}, defaultUser: "root"}
}

// EnvVars returns a copy of the sandbox-wide env vars.
func (s *State) EnvVars() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.envVars)
}

// SetEnvVars replaces the sandbox-wide env vars.
func (s *State) SetEnvVars(vars map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envVars = maps.Clone(vars)
	if s.envVars == nil {
		s.envVars = map[string]string{}
	}
}

// TrustEnv returns the variables that point tools at the trust store
// /init installed CAs into (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, …):
// defaults beneath the image's environment and the sandbox's vars.
func (s *State) TrustEnv() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.trustEnv)
}

// SetTrustEnv replaces those variables.
func (s *State) SetTrustEnv(vars map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trustEnv = maps.Clone(vars)
}

// AccessToken returns the token every protected request must carry, or ""
// when none is set.
func (s *State) AccessToken() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accessToken
}

// SetAccessToken sets the token; "" turns enforcement off.
func (s *State) SetAccessToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accessToken = token
}

// DefaultUser is the user commands and file operations run as when the
// request names none.
func (s *State) DefaultUser() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaultUser
}

// SetDefaultUser changes the default user; "" is ignored.
func (s *State) SetDefaultUser(name string) {
	if name == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaultUser = name
}

// DefaultWorkdir is where commands start and relative paths resolve when
// the request gives none; "" means the user's home.
func (s *State) DefaultWorkdir() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaultWorkdir
}

// SetDefaultWorkdir changes the default workdir; "" is ignored.
func (s *State) SetDefaultWorkdir(dir string) {
	if dir == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaultWorkdir = dir
}

// SyncClock records a clock timestamp from the server and reports whether it
// is newer than any seen before (older ones must be ignored).
func (s *State) SyncClock(ts time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ts.After(s.lastTimestamp) {
		return false
	}
	s.lastTimestamp = ts
	return true
}

// Saved is the settings in a form that outlives the agent's process: an
// agent that its init restarts after a crash loads them and goes on as
// the server configured it.
type Saved struct {
	EnvVars        map[string]string `json:"envVars"`
	AccessToken    string            `json:"accessToken"`
	DefaultUser    string            `json:"defaultUser"`
	DefaultWorkdir string            `json:"defaultWorkdir"`
	LastTimestamp  time.Time         `json:"lastTimestamp"`
	TrustEnv       map[string]string `json:"trustEnv"`
}

// Save returns the settings as they are.
func (s *State) Save() Saved {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Saved{
		EnvVars:        maps.Clone(s.envVars),
		AccessToken:    s.accessToken,
		DefaultUser:    s.defaultUser,
		DefaultWorkdir: s.defaultWorkdir,
		LastTimestamp:  s.lastTimestamp,
		TrustEnv:       maps.Clone(s.trustEnv),
	}
}

// Load replaces the settings with saved ones.
func (s *State) Load(v Saved) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envVars = maps.Clone(v.EnvVars)
	if s.envVars == nil {
		s.envVars = map[string]string{}
	}
	s.accessToken = v.AccessToken
	s.defaultUser = cmp.Or(v.DefaultUser, "root")
	s.defaultWorkdir = v.DefaultWorkdir
	s.lastTimestamp = v.LastTimestamp
	s.trustEnv = maps.Clone(v.TrustEnv)
}
