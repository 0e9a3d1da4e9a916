// Package logkey holds the convention every package of the server logs
// by: a logger is injected (a nil one discards), each package tags what
// it logs with its component instead of prefixing messages, and the
// attributes that name Warren's objects have one key each, here, so that
// a search for sandbox=ID finds every line about that sandbox whichever
// package wrote it.
//
// It owns no handler and no output: `warren serve` makes the one logger
// (JSON, or text on a terminal) and hands it down.
package logkey

import "log/slog"

// Attribute keys. Errors go under "err" everywhere.
const (
	Component = "component" // the package that logged, as For tags it
	Sandbox   = "sandbox"   // a sandbox's ID
	SandboxIP = "sandbox_ip"
	Template  = "template" // a template's ID
	Build     = "build"    // a template build's ID
	Container = "container"
	Team      = "team"
	Volume    = "volume"
	Webhook   = "webhook"
	Image     = "image"
)

// For returns log tagged as component's, or a logger that discards
// everything when log is nil (a test, or a caller that wants no logs).
func For(log *slog.Logger, component string) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log.With(Component, component)
}
