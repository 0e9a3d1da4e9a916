// Command warren is the one binary Warren's users run: it serves the E2B-compatible API and
// manages the images, sandboxes and keys behind it. Each subcommand lives in its own file and
// has one line in Main.commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	err := m.Run(ctx, os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintf(os.Stderr, "warren: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "warren: %v\n", err)
		os.Exit(1)
	}
}

// Main is the warren command: the streams and environment every subcommand uses, so tests can
// run it in-process.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads WARREN_* and other environment variables; os.Getenv in production.
	Getenv func(string) string
}

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands is the subcommand table, in the order usage lists them.
func (m *Main) commands() []command {
	return []command{
		{"image", "build the images sandboxes start from (warren/base, warren/code-interpreter)", m.runImage},
		{"serve", "serve the E2B-compatible API and sandbox proxy", m.runServe},
		{"doctor", "check Docker, the images, iptables, the agent binary, the port and the state dir", m.runDoctor},
		{"runtime", "set up gVisor for --runtime=gvisor: runsc and the engine's daemon.json", m.runRuntime},
		{"sandbox", "list, kill, pause, stop or resume sandboxes of a running server", m.runSandbox},
		{"keys", "create, list or revoke API keys", m.runKeys},
		{"teams", "set and show teams' quotas; kill a team's sandboxes; drain the server", m.runTeams},
		{"dashboard", "print a single-use login link to the dashboard", m.runDashboard},
		{"template", "build a template from a Dockerfile on a running server", m.runTemplate},
		{"node", "run the node agent of the Kubernetes engine (a DaemonSet)", m.runNode},
		{"local-path", "run a node's local-path provisioner of PersistentVolumes (a DaemonSet)", m.runLocalPath},
		{"version", "print warren's version", m.runVersion},
	}
}

// Run runs the subcommand args[0] with the rest of args.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.usage(m.Stderr)
		return usageError{"no command given"}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			m.usage(m.Stdout)
			return nil
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, c := range m.commands() {
		if c.name == name {
			return c.run(ctx, rest)
		}
	}
	m.usage(m.Stderr)
	return usageError{fmt.Sprintf("unknown command %q", name)}
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprint(w, "Warren: self-hosted sandboxes for AI agents, speaking E2B's protocol.\n\nUsage: warren <command> [arguments]\n\nCommands:\n")
	for _, c := range m.commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun \"warren help <command>\" for a command's flags.\n")
}

// usageError is a mistake in the command line; warren exits with status 2 for it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// newFlagSet returns a flag set that reports errors instead of exiting, with a usage line.
func (m *Main) newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n", synopsis, description)
		if hasFlags(fs) {
			fmt.Fprint(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs, turning mistakes into usage errors; it returns flag.ErrHelp
// for -h after printing usage.
// parseFlags parses args with flags anywhere among the arguments, as in
// "warren keys revoke ID --state-dir DIR"; after "--" everything is an
// argument.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}
