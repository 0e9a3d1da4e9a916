package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// image builds a fake image root from path → content; a content of "dir/"
// makes a directory.
func image(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if content == "dir/" {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

func owner(t *testing.T, path string) string {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	st := info.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d %v", st.Uid, st.Gid, info.Mode())
}

func TestEnsureDefaultUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown the home directory")
	}
	days := fmt.Sprint(time.Now().Unix() / 86400)
	debianPasswd := "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	debianGroup := "root:x:0:\nsudo:x:27:\nnogroup:x:65534:\n"
	tests := []struct {
		name  string
		files map[string]string
		want  map[string]string // file → content or owner (paths ending in "@owner")
	}{
		{
			name: "debian with sudo and skel",
			files: map[string]string{
				"etc/passwd":        debianPasswd,
				"etc/group":         debianGroup,
				"etc/shadow":        "root:*:19000:0:99999:7:::\n",
				"bin/bash":          "",
				"usr/bin/sudo":      "",
				"etc/skel/.bashrc":  "# bashrc\n",
				"etc/skel/.config/": "dir/",
			},
			want: map[string]string{
				"etc/passwd":                         debianPasswd + "user:x:1000:1000::/home/user:/bin/bash\n",
				"etc/group":                          "root:x:0:\nsudo:x:27:user\nnogroup:x:65534:\nuser:x:1000:\n",
				"etc/shadow":                         "root:*:19000:0:99999:7:::\nuser:*:" + days + ":0:99999:7:::\n",
				"etc/sudoers.d/90-warren-user":       "user ALL=(ALL:ALL) NOPASSWD: ALL\n",
				"home/user/.bashrc":                  "# bashrc\n",
				"home/user@owner":                    "1000:1000 drwxr-xr-x",
				"home/user/.bashrc@owner":            "1000:1000 -rw-r--r--",
				"home/user/.config@owner":            "1000:1000 drwxr-xr-x",
				"etc/sudoers.d/90-warren-user@owner": "0:0 -r--r-----",
			},
		},
		{
			name: "uid and gid 1000 taken, wheel group, no bash, no sudo, no shadow",
			files: map[string]string{
				"etc/passwd": "root:x:0:0:root:/root:/bin/ash\nnode:x:1000:1000::/home/node:/bin/sh\n",
				"etc/group":  "root:x:0:\nwheel:x:10:root\nnode:x:1000:\n",
			},
			want: map[string]string{
				"etc/passwd":                   "root:x:0:0:root:/root:/bin/ash\nnode:x:1000:1000::/home/node:/bin/sh\nuser:x:1001:1001::/home/user:/bin/sh\n",
				"etc/group":                    "root:x:0:\nwheel:x:10:root,user\nnode:x:1000:\nuser:x:1001:\n",
				"etc/shadow":                   "<open ROOT/etc/shadow: no such file or directory>",
				"etc/sudoers.d/90-warren-user": "<open ROOT/etc/sudoers.d/90-warren-user: no such file or directory>",
				"home/user@owner":              "1001:1001 drwxr-xr-x",
			},
		},
		{
			name: "group user exists, uid free but gid taken elsewhere",
			files: map[string]string{
				"etc/passwd":         "root:x:0:0:root:/root:/bin/sh\n",
				"etc/group":          "root:x:0:\nuser:x:1500:\n",
				"home/user/":         "dir/",
				"home/user/existing": "kept",
				"etc/skel/.profile":  "skel",
			},
			want: map[string]string{
				"etc/passwd":         "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1500::/home/user:/bin/sh\n",
				"etc/group":          "root:x:0:\nuser:x:1500:\n",
				"home/user@owner":    "1000:1500 drwxr-xr-x",
				"home/user/existing": "kept",
				"home/user/.profile": "<open ROOT/home/user/.profile: no such file or directory>",
			},
		},
		{
			name:  "scratch image without account files",
			files: map[string]string{},
			want: map[string]string{
				"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n",
				"etc/group":  "root:x:0:\nuser:x:1000:\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := image(t, tt.files)
			created, err := ensureDefaultUser(root)
			if err != nil || !created {
				t.Fatalf("ensureDefaultUser = %v, %v", created, err)
			}
			got := snapshot(t, root, tt.want)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
			// A restart finds the user and changes nothing.
			created, err = ensureDefaultUser(root)
			if err != nil || created {
				t.Fatalf("second ensureDefaultUser = %v, %v", created, err)
			}
			if diff := cmp.Diff(got, snapshot(t, root, tt.want)); diff != "" {
				t.Errorf("second run changed the image (-first +second):\n%s", diff)
			}
		})
	}
}

// snapshot reads the files named by want's keys.
func snapshot(t *testing.T, root string, want map[string]string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for k := range want {
		if p, ok := strings.CutSuffix(k, "@owner"); ok {
			got[k] = owner(t, filepath.Join(root, p))
			continue
		}
		got[k] = strings.ReplaceAll(read(t, filepath.Join(root, k)), root, "ROOT")
	}
	return got
}

func TestShadowModeKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown the home directory")
	}
	root := image(t, map[string]string{"etc/passwd": "root:x:0:0::/root:/bin/sh\n", "etc/shadow": "root:*:1:0:99999:7:::\n"})
	shadow := filepath.Join(root, "etc/shadow")
	if err := os.Chmod(shadow, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureDefaultUser(root); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(shadow)
	if err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("shadow mode = %v, %v; want 0640", info.Mode(), err)
	}
}
