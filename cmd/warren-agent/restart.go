package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/agent/state"
)

// An agent that ends while its sandbox runs (killed by root inside, by the
// OOM killer, or crashed) is started again by the init, and goes on as the
// server configured it: after each /init it keeps its settings in a file,
// and a restarted agent loads them. The init restarts only an agent whose
// settings are kept, since a fresh agent has no access token and would
// serve anyone until the server noticed; without the file it ends the
// container as before, which the lifecycle manager handles like any
// stopped sandbox.

// settingsPath is where the agent keeps its settings, under its Root: the
// container's own tmpfs (never in an image committed from the sandbox, in
// the memory of a gVisor checkpoint), readable by root alone.
const settingsPath = "dev/shm/.warren-agent/settings.json"

// restartEnv marks an agent that its init started again after the first
// one ended: it loads the kept settings and leaves alone what the first
// one started for the whole sandbox (the desktop).
const restartEnv = "WARREN_AGENT_RESTARTED"

// Restarts are for an agent that ended by accident: one that keeps ending
// is let go, and the container ends with it.
const (
	maxRestarts   = 5
	restartWindow = time.Minute
)

// keptSettings is the file's content.
type keptSettings struct {
	Settings     state.Saved `json:"settings"`
	ServerSecret string      `json:"serverSecret"`
}

// keepSettings writes the settings file through a rename, so that a
// restart never reads it half-written.
func keepSettings(root string, v keptSettings) error {
	path := filepath.Join(root, settingsPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadSettings reads the settings file.
func loadSettings(root string) (keptSettings, error) {
	var v keptSettings
	b, err := os.ReadFile(filepath.Join(root, settingsPath))
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v)
}

// forgetSettings removes the settings file; none is no error.
func forgetSettings(root string) error {
	if err := os.Remove(filepath.Join(root, settingsPath)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// settingsKept reports whether an agent restarted now would find its
// settings: the init's test before it restarts one.
func settingsKept(root string) func() bool {
	return func() bool {
		_, err := os.Stat(filepath.Join(root, settingsPath))
		return err == nil
	}
}

// restartAllowed reports whether one more restart at now stays within
// maxRestarts in restartWindow, and records it if so.
func restartAllowed(restarts *[]time.Time, now time.Time) bool {
	recent := (*restarts)[:0]
	for _, t := range *restarts {
		if now.Sub(t) < restartWindow {
			recent = append(recent, t)
		}
	}
	*restarts = recent
	if len(recent) >= maxRestarts {
		return false
	}
	*restarts = append(*restarts, now)
	return true
}
