package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

func (m *Main) runVersion(_ context.Context, args []string) error {
	fs := m.newFlagSet("version", "warren version", "Print warren's version, the Go version it was built with and its source revision.")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{"version takes no arguments"}
	}
	fmt.Fprintln(m.Stdout, versionString())
	return nil
}

// versionString is the module version (a tag when installed with go install, "(devel)" from a
// work tree), the Go version, and the VCS revision when the build recorded one.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "warren (unknown version)"
	}
	s := fmt.Sprintf("warren %s %s", info.Main.Version, info.GoVersion)
	settings := map[string]string{}
	for _, kv := range info.Settings {
		settings[kv.Key] = kv.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		s += " " + rev
		if settings["vcs.modified"] == "true" {
			s += "+dirty"
		}
	}
	return s
}
