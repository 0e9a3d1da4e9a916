package logkey_test

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/logkey"
)

func TestFor(t *testing.T) {
	var buf bytes.Buffer
	log := logkey.For(slog.New(slog.NewTextHandler(&buf, nil)), "egress")
	log.Info("connection refused", logkey.SandboxIP, "10.11.0.2")
	if got := buf.String(); !strings.Contains(got, `msg="connection refused" component=egress sandbox_ip=10.11.0.2`) {
		t.Errorf("logged %q", got)
	}
	if logkey.For(nil, "egress").Enabled(t.Context(), slog.LevelError) {
		t.Error("a nil logger logs")
	}
}

// TestConvention reads the server's packages: none falls back to
// slog.Default (a nil logger discards), and none prefixes its messages
// with its own name (For tags them with the component).
func TestConvention(t *testing.T) {
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		src := string(b)
		if strings.Contains(src, "slog.Default()") {
			t.Errorf("%s: slog.Default(); take a logger and discard when it is nil (logkey.For)", p)
		}
		pkg := filepath.Base(filepath.Dir(p))
		prefixed := regexp.MustCompile(`\.(Debug|Info|Warn|Error)(Context)?\([^"\n]*"` + regexp.QuoteMeta(pkg) + `: `)
		if m := prefixed.FindString(src); m != "" {
			t.Errorf("%s: %s...: a message prefixed with its package; logkey.For tags it with the component", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
