package mcpgateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Defaults of Options.
const (
	DefaultGitBase = "https://github.com"
	DefaultDir     = "/opt/mcp-gateway"
)

// Options say where servers come from and go to.
type Options struct {
	// GitBase is the URL (or local path) that github/<owner>/<repo> entries
	// are cloned from, as <GitBase>/<owner>/<repo>; "" = DefaultGitBase.
	// Offline setups point it at a mirror or a local directory of repos.
	GitBase string
	// Dir holds clones, npm prefixes and Python venvs; "" = DefaultDir.
	Dir string
	// Output receives what installers print and what servers write to
	// stderr, each line prefixed with its server; nil = discarded.
	Output io.Writer
}

func (o Options) gitBase() string {
	if o.GitBase == "" {
		return DefaultGitBase
	}
	return strings.TrimRight(o.GitBase, "/")
}

func (o Options) dir() string {
	if o.Dir == "" {
		return DefaultDir
	}
	return o.Dir
}

func (o Options) output() io.Writer {
	if o.Output == nil {
		return io.Discard
	}
	return o.Output
}

// Install makes s ready to start: a github server cloned (once) and its
// installCmd run (again only when it changes), a catalog server's package
// installed unless it already is (pulled into the template, or by an
// earlier start).
func Install(ctx context.Context, o Options, s Server) error {
	if s.Repo != "" {
		return installGitHub(ctx, o, s)
	}
	return installPackage(ctx, o, s)
}

// Pull installs servers ahead of time, into a template's image (E2B's
// `Template().addMcpServer(...)` runs `mcp-gateway pull NAME...`): catalog
// names get their packages, github/<owner>/<repo> names their clone.
func Pull(ctx context.Context, o Options, names []string) error {
	if len(names) == 0 {
		return errors.New("pull needs the names of the MCP servers to install")
	}
	for _, name := range names {
		var s Server
		if rest, ok := strings.CutPrefix(name, GitHubPrefix); ok {
			owner, repo, ok := strings.Cut(rest, "/")
			if !ok || !repoPart.MatchString(owner) || !repoPart.MatchString(repo) {
				return fmt.Errorf("MCP server %q: a github entry is github/<owner>/<repo>", name)
			}
			s = Server{Key: name, Repo: owner + "/" + repo}
		} else {
			e, ok := catalog[name]
			if !ok {
				return fmt.Errorf("unknown MCP server %q: this gateway's catalog has %s", name, strings.Join(CatalogNames(), ", "))
			}
			s = Server{Key: name, Catalog: e}
		}
		if err := Install(ctx, o, s); err != nil {
			return err
		}
	}
	return nil
}

func (o Options) cloneDir(s Server) string { return filepath.Join(o.dir(), "github", s.Repo) }

func installGitHub(ctx context.Context, o Options, s Server) error {
	dir := o.cloneDir(s)
	if _, err := os.Stat(filepath.Join(dir, ".git")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		url := o.gitBase() + "/" + s.Repo
		if err := run(ctx, o, s.Key, "", nil, "git", "clone", "--depth", "1", "--quiet", url, dir); err != nil {
			_ = os.RemoveAll(dir)
			return fmt.Errorf("MCP server %q: git clone %s: %w", s.Key, url, err)
		}
	} else if err != nil {
		return err
	}
	if strings.TrimSpace(s.InstallCmd) == "" {
		return nil
	}
	// The clone keeps which installCmd last succeeded in it, so a restarted
	// gateway (or one whose template ran it) does not install again.
	sum := sha256.Sum256([]byte(s.InstallCmd))
	mark := filepath.Join(dir, ".git", "mcp-gateway-installed")
	if b, err := os.ReadFile(mark); err == nil && string(b) == hex.EncodeToString(sum[:]) {
		return nil
	}
	if err := run(ctx, o, s.Key, dir, s.Env, "bash", "-c", s.InstallCmd); err != nil {
		return fmt.Errorf("MCP server %q: installCmd: %w", s.Key, err)
	}
	return os.WriteFile(mark, []byte(hex.EncodeToString(sum[:])), 0o644)
}

func (o Options) packageDir(e *CatalogEntry) string {
	return filepath.Join(o.dir(), e.Installer, e.Name)
}

func installPackage(ctx context.Context, o Options, s Server) error {
	e := s.Catalog
	if _, err := packageCommand(o, e); err == nil {
		return nil
	}
	dir := o.packageDir(e)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var err error
	switch e.Installer {
	case NPM:
		err = run(ctx, o, s.Key, dir, nil, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, e.Package)
	case PyPI:
		err = run(ctx, o, s.Key, "", nil, "python3", "-m", "venv", dir)
		if err == nil {
			err = run(ctx, o, s.Key, "", nil, filepath.Join(dir, "bin", "pip"), "install", "--quiet", e.Package)
		}
	default:
		err = fmt.Errorf("unknown installer %q", e.Installer)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("MCP server %q: install %s package %s: %w", s.Key, e.Installer, e.Package, err)
	}
	if _, err := packageCommand(o, e); err != nil {
		return fmt.Errorf("MCP server %q: %w", s.Key, err)
	}
	return nil
}

// packageCommand is the installed executable of a catalog server.
func packageCommand(o Options, e *CatalogEntry) (string, error) {
	dir := o.packageDir(e)
	var path string
	switch e.Installer {
	case NPM:
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", e.Package, "package.json"))
		if err != nil {
			return "", err
		}
		name, err := npmBin(e.Package, b)
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, "node_modules", ".bin", name)
	case PyPI:
		path = filepath.Join(dir, "bin", e.Script)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s package %s is installed but has no %s: %w", e.Installer, e.Package, filepath.Base(path), err)
	}
	return path, nil
}

// npmBin picks a package's executable from its package.json: its only bin,
// or the one named like the package.
func npmBin(pkg string, packageJSON []byte) (string, error) {
	var meta struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(packageJSON, &meta); err != nil {
		return "", fmt.Errorf("npm package %s: package.json: %w", pkg, err)
	}
	base := pkg[strings.LastIndex(pkg, "/")+1:]
	var one string
	if json.Unmarshal(meta.Bin, &one) == nil && one != "" {
		return base, nil
	}
	var bins map[string]string
	if err := json.Unmarshal(meta.Bin, &bins); err != nil || len(bins) == 0 {
		return "", fmt.Errorf("npm package %s has no bin to run", pkg)
	}
	if _, ok := bins[base]; ok {
		return base, nil
	}
	if len(bins) == 1 {
		for name := range bins {
			return name, nil
		}
	}
	return "", fmt.Errorf("npm package %s has several bins and none is named %s", pkg, base)
}

// run runs an installer, its output going to o's output; a failure says
// how it ended with the last of what it printed.
func run(ctx context.Context, o Options, key, dir string, env map[string]string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = environ(env)
	tail := &tailBuffer{max: 2048}
	out := io.MultiWriter(newLinePrefixer(o.output(), key), tail)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if t := strings.TrimSpace(tail.String()); t != "" {
			return fmt.Errorf("%w: %s", err, t)
		}
		return err
	}
	return nil
}

// environ is the gateway's environment with env added.
func environ(env map[string]string) []string {
	e := os.Environ()
	for k, v := range env {
		e = append(e, k+"="+v)
	}
	return e
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// linePrefixer writes each line to w as "[key] line".
type linePrefixer struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	partial []byte
}

func newLinePrefixer(w io.Writer, key string) *linePrefixer {
	return &linePrefixer{w: w, prefix: []byte("[" + key + "] ")}
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := append(append([]byte{}, l.prefix...), l.partial[:i+1]...)
		l.partial = l.partial[i+1:]
		if _, err := l.w.Write(line); err != nil {
			return len(p), nil
		}
	}
	return len(p), nil
}

// tee writes to every writer, ignoring their errors: a full log must not
// stop a server's stderr from being read.
type tee []io.Writer

func newTee(w ...io.Writer) tee { return tee(w) }

func (t tee) Write(p []byte) (int, error) {
	for _, w := range t {
		_, _ = w.Write(p)
	}
	return len(p), nil
}
