package template_test

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/template"
)

// folderUpload is what the SDK uploads for copy("folder/*", ...) of the
// SDK's own test folder: a file, and links relative, absolute and dangling.
func folderUpload(t testing.TB) []byte {
	return archive(t,
		entry{name: "folder/symlink.txt", typ: tar.TypeSymlink, link: "test.txt"},
		entry{name: "folder/symlink2.txt", typ: tar.TypeSymlink, link: "/tmp/python_sync_test_x/folder/test.txt"},
		entry{name: "folder/symlink3.txt", typ: tar.TypeSymlink, link: "12345test.txt"},
		entry{name: "folder/test.txt", body: "This is a test file."},
	)
}

// TestCopySemantics checks what each kind of COPY step becomes: the
// Dockerfile instruction and the context entries it copies, as E2B's
// server copies them.
func TestCopySemantics(t *testing.T) {
	nested := archive(t,
		entry{name: "src", typ: tar.TypeDir, mode: 0o755},
		entry{name: "src/a.ts", body: "a"},
		entry{name: "src/lib", typ: tar.TypeDir, mode: 0o755},
		entry{name: "src/lib/b.ts", body: "b", mode: 0o600},
		entry{name: "src/lib/ln", typ: tar.TypeSymlink, link: "b.ts"},
	)
	for _, tc := range []struct {
		name   string
		upload []byte
		args   []string
		copy   string            // the COPY instruction
		modes  map[string]int64  // context entries and their modes
		links  map[string]string // context links and their targets
	}{
		{name: "file to a file path", upload: archive(t, entry{name: "hello.txt", body: "hi"}),
			args: []string{"hello.txt", "/opt/greeting.txt", "", ""},
			copy: `COPY --chown=user:user ["s1/hello.txt","/opt/greeting.txt"]`},
		{name: "file into a directory", upload: archive(t, entry{name: "hello.txt", body: "hi"}),
			args:  []string{"hello.txt", "/opt/", "root", "0700"},
			copy:  `COPY --chown=root:root ["s1/hello.txt","/opt/"]`,
			modes: map[string]int64{"s1/hello.txt": 0o700}},
		{name: "a directory: its contents, mode on everything under it", upload: nested,
			args:  []string{"src", "app", "user:staff", "0750"},
			copy:  `COPY --chown=user:staff ["s1/src","app"]`,
			modes: map[string]int64{"s1/src/": 0o755, "s1/src/a.ts": 0o750, "s1/src/lib/": 0o750, "s1/src/lib/b.ts": 0o750},
			links: map[string]string{"s1/src/lib/ln": "b.ts"}},
		{name: "a glob: the directory it matches in", upload: folderUpload(t),
			args: []string{"folder/*", "folder", "", ""},
			copy: `COPY --chown=user:user ["s1/folder","folder"]`,
			links: map[string]string{"s1/folder/symlink.txt": "test.txt", "s1/folder/symlink2.txt": "/tmp/python_sync_test_x/folder/test.txt",
				"s1/folder/symlink3.txt": "12345test.txt"}},
		{name: "a nested glob keeps the tree", upload: nested,
			args: []string{"src/**/*.ts", "/out/", "", ""},
			copy: `COPY --chown=user:user ["s1/src","/out/"]`},
		{name: "a glob at the top: the whole upload", upload: archive(t, entry{name: "a.txt", body: "a"}, entry{name: "b.txt", body: "b"}),
			args:  []string{"*.txt", "/data", "", "0644"},
			copy:  `COPY --chown=user:user ["s1","/data"]`,
			modes: map[string]int64{"s1/a.txt": 0o644, "s1/b.txt": 0o644}},
		{name: "a link, named as the destination", upload: folderUpload(t),
			args:  []string{"folder/symlink2.txt", "folder/abs.txt", "", "0600"},
			copy:  `COPY --chown=user:user ["l1","folder/"]`,
			links: map[string]string{"l1/abs.txt": "/tmp/python_sync_test_x/folder/test.txt"}},
		{name: "a dangling link into a directory", upload: folderUpload(t),
			args:  []string{"folder/symlink3.txt", "/links/", "", ""},
			copy:  `COPY --chown=user:user ["l1","/links/"]`,
			links: map[string]string{"l1/symlink3.txt": "12345test.txt"}},
		{name: "a link into the workdir", upload: folderUpload(t),
			args:  []string{"folder/symlink.txt", ".", "", ""},
			copy:  `COPY --chown=user:user ["l1","./"]`,
			links: map[string]string{"l1/symlink.txt": "test.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &fakeEngine{}
			reg, _, _ := newRegistry(t, eng, 1)
			_, b, _ := build(t, reg, "copy", template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
				{Type: "COPY", Args: tc.args, FilesHash: hashOf(tc.upload)},
			}}, tc.upload)
			if b.Status != template.StatusReady {
				t.Fatalf("status %s, reason %+v", b.Status, b.Reason)
			}
			eng.mu.Lock()
			defer eng.mu.Unlock()
			df := string(eng.context["Dockerfile"])
			if !strings.Contains(df, "\n"+tc.copy+"\n") {
				t.Errorf("Dockerfile:\n%s\nwant the line %s", df, tc.copy)
			}
			if strings.Contains(df, "chmod") {
				t.Errorf("modes set by a command, not in the context:\n%s", df)
			}
			for name, mode := range tc.modes {
				h := eng.headers[name]
				if h == nil {
					t.Errorf("context has no %s", name)
				} else if h.Mode&0o7777 != mode {
					t.Errorf("%s: mode %o, want %o", name, h.Mode, mode)
				}
			}
			for name, target := range tc.links {
				h := eng.headers[name]
				if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
					t.Errorf("%s: %+v, want a link to %s", name, h, target)
				}
			}
		})
	}
}

func TestCopyFailures(t *testing.T) {
	eng := &fakeEngine{}
	reg, _, _ := newRegistry(t, eng, 1)
	up := folderUpload(t)
	for _, tc := range []struct {
		src, want string
	}{
		{"other/*", "failed to move files in sandbox: source path does not exist: other/*"},
		{"folder/symlink.txt/x", "failed to move files in sandbox: source path goes through a symbolic link"},
	} {
		_, b, _ := build(t, reg, "copy-fails", template.BuildSpec{FromImage: "warren/base", Steps: []template.Step{
			{Type: "RUN", Args: []string{"true"}},
			{Type: "COPY", Args: []string{tc.src, "dest"}, FilesHash: hashOf(up)},
		}}, up)
		if b.Status != template.StatusError || b.Reason.Step != "2" || !strings.HasPrefix(b.Reason.Message, tc.want) {
			t.Errorf("COPY %s: %s %+v, want step 2 failing with %q", tc.src, b.Status, b.Reason, tc.want)
		}
	}
}
