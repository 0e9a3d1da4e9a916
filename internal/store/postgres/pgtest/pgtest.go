// Package pgtest starts a PostgreSQL server of a test's own, for the
// tests that stop and start one (a store across a PostgreSQL restart):
// Debian's server binaries (/usr/lib/postgresql/N/bin), a data directory
// and a unix socket directory in a temporary directory, a free port on
// 127.0.0.1, trust authentication for local connections only. It never
// touches the shared test cluster of scripts/ensure-postgres.sh, which
// other tests use at the same time; tests that only need a database make
// theirs there (WARREN_TEST_POSTGRES), which is cheaper.
//
// The server runs as a child of the test's process (not daemonised, as
// pg_ctl would), which the kernel stops if the test's process dies: a
// test killed at its timeout leaves no server running.
//
// Without the binaries Start skips the test, saying how to install them,
// as the store's other tests do without their database; with CI set it
// fails instead: CI installs them (scripts/ensure-postgres.sh) and skips
// nothing for want of a component.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a PostgreSQL server of one test, stopped and removed when the
// test ends.
type Server struct {
	tb   testing.TB
	bin  string // the server's bin directory
	dir  string // holds data/, run/ (the socket) and postgres.log
	port int
	// cred is the server's user when the test runs as root, which
	// PostgreSQL refuses to run as; nil: the test's own.
	cred *syscall.Credential
	// proc is the running server, nil while stopped; exited is closed
	// when it exits.
	proc   *exec.Cmd
	exited chan struct{}
}

// Start initialises a cluster in a new temporary directory and starts it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: binDir(tb), cred: owner(tb)}
	dir, err := os.MkdirTemp("", "warren-pgtest-")
	if err != nil {
		tb.Fatal(err)
	}
	s.dir = dir
	tb.Cleanup(func() {
		if s.proc != nil {
			s.proc.Process.Signal(syscall.SIGQUIT) // immediate shutdown: nothing here is kept
			<-s.exited
		}
		os.RemoveAll(dir)
	})
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		tb.Fatal(err)
	}
	s.chown(dir, run)
	s.run(filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
	s.port = freePort(tb)
	// Appended as root, the file stays the server user's.
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n", s.port, run)
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		tb.Fatal(err)
	}
	s.Start()
	return s
}

// URL is the URL of the server's database postgres, over TCP.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Stop stops the server as an operator's restart does (PostgreSQL's fast
// shutdown: sessions are ended, their open transactions rolled back, what
// is committed is written out) and returns once it is down.
func (s *Server) Stop() {
	s.tb.Helper()
	if err := s.proc.Process.Signal(syscall.SIGINT); err != nil {
		s.tb.Fatal(err)
	}
	select {
	case <-s.exited:
		s.proc = nil
	case <-time.After(time.Minute):
		s.tb.Fatalf("PostgreSQL has not stopped a minute after its fast shutdown began%s", s.logEnd())
	}
}

// Start starts the stopped server on its port and data, and returns once
// it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	log, err := os.OpenFile(s.Log(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer log.Close()
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data())
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.proc, s.exited = cmd, exited
	deadline := time.Now().Add(time.Minute)
	for s.command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-t", "1").Run() != nil {
		select {
		case <-exited:
			s.proc = nil
			s.tb.Fatalf("PostgreSQL exited as it started%s", s.logEnd())
		default:
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("PostgreSQL does not accept connections a minute after its start%s", s.logEnd())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Log is the path of the server's log.
func (s *Server) Log() string { return filepath.Join(s.dir, "postgres.log") }

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// logEnd is the end of the server's log, to show with a failure.
func (s *Server) logEnd() string {
	log, _ := os.ReadFile(s.Log())
	return "; its log ends:\n" + string(log[max(0, len(log)-2000):])
}

// run runs a command as the server's user; its failure fails the test
// with its output.
func (s *Server) run(name string, args ...string) {
	s.tb.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		s.tb.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

func (s *Server) chown(paths ...string) {
	if s.cred == nil {
		return
	}
	for _, p := range paths {
		if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			s.tb.Fatal(err)
		}
	}
}

// binDir returns the newest installed server's bin directory: Debian
// keeps it out of PATH, one per major version.
func binDir(tb testing.TB) string {
	tb.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		const msg = "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): " +
			"run scripts/ensure-postgres.sh, which installs Debian's postgresql package"
		if os.Getenv("CI") != "" {
			tb.Fatal(msg + "; with CI set nothing is skipped")
		}
		tb.Skip(msg)
	}
	sort.Slice(found, func(i, j int) bool { return major(found[i]) < major(found[j]) })
	return found[len(found)-1]
}

// major is the major version in a bin directory's path, 0 if none.
func major(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

// owner returns the user to run the server as: postgres (the user
// Debian's package makes) when the test runs as root, else nil.
func owner(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		tb.Fatalf("PostgreSQL refuses to run as root, and there is no user postgres to run it as (%v): "+
			"run scripts/ensure-postgres.sh, which installs Debian's postgresql package and its user", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// freePort returns a port on 127.0.0.1 that nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
