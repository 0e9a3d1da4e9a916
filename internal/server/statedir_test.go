package server

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
)

func TestWarnOpenStateDir(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o700, false}, {0o755, true}, {0o711, true}, {0o750, true}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			warnOpenStateDir(dir, slog.New(slog.NewTextHandler(&buf, nil)))
			if got := strings.Contains(buf.String(), "chmod 700"); got != tc.warn {
				t.Errorf("warned %v (%q), want %v", got, buf.String(), tc.warn)
			}
		})
	}
}
