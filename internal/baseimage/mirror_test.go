package baseimage

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

const debianSources = `Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
`

func TestFindMirrors(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		override string
		want     Mirrors
		wantErr  string
	}{
		{
			name:  "deb822",
			files: map[string]string{"etc/apt/sources.list.d/debian.sources": debianSources},
			want:  Mirrors{Main: "http://mirror.example/debian", Security: "http://mirror.example/debian-security"},
		},
		{
			name: "one-line",
			files: map[string]string{"etc/apt/sources.list": `# comment
deb-src http://src.example/debian bookworm main
deb http://one.example/debian bookworm main contrib # trailing comment
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://sec.example/debian-security bookworm-security main
`},
			want: Mirrors{Main: "http://one.example/debian", Security: "http://sec.example/debian-security"},
		},
		{
			name: "options with spaces, other suites skipped",
			files: map[string]string{"etc/apt/sources.list": `deb [ arch=amd64 ] http://old.example/debian bullseye main
deb [ arch=amd64 trusted=yes ] http://new.example/debian bookworm main
`},
			want: Mirrors{Main: "http://new.example/debian"},
		},
		{
			name: "sources.list before sources.list.d, disabled and deb-src stanzas skipped",
			files: map[string]string{
				"etc/apt/sources.list": "deb http://first.example/debian bookworm main\n",
				"etc/apt/sources.list.d/a.sources": `Types: deb
URIs: http://disabled.example/debian
Suites: bookworm-security
Enabled: no

types: deb-src
uris: http://src.example/debian-security
suites: bookworm-security

Types: deb
URIs:
 http://continued.example/debian-security
Suites: bookworm-security
`,
				"etc/apt/sources.list.d/nodesource.sources.disabled": "Types: deb\nURIs: http://node.example\nSuites: bookworm\n",
			},
			want: Mirrors{Main: "http://first.example/debian", Security: "http://continued.example/debian-security"},
		},
		{
			name:     "override replaces main, keeps security",
			files:    map[string]string{"etc/apt/sources.list.d/debian.sources": debianSources},
			override: "https://other.example/debian/",
			want:     Mirrors{Main: "https://other.example/debian", Security: "http://mirror.example/debian-security"},
		},
		{
			name:     "override without apt configuration",
			files:    map[string]string{},
			override: "http://only.example/debian",
			want:     Mirrors{Main: "http://only.example/debian"},
		},
		{
			name:    "no configuration says what to pass",
			files:   map[string]string{"etc/apt/sources.list": "deb http://ubuntu.example/ubuntu noble main\n"},
			wantErr: "pass --mirror URL or set WARREN_DEBIAN_MIRROR",
		},
		{
			name:     "bad override",
			files:    map[string]string{"etc/apt/sources.list.d/debian.sources": debianSources},
			override: "mirror.example/debian",
			wantErr:  "must be an http:// or https:// URL",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fstest.MapFS{}
			for name, data := range tt.files {
				root[name] = &fstest.MapFile{Data: []byte(data)}
			}
			got, err := FindMirrors(root, "bookworm", tt.override)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FindMirrors error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindMirrors: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FindMirrors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAptSourcesFile(t *testing.T) {
	got := aptSourcesFile(Mirrors{Main: "http://m.example/debian", Security: "http://m.example/debian-security"}, "bookworm")
	want := `Types: deb
URIs: http://m.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://m.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aptSourcesFile (-want +got):\n%s", diff)
	}
	// What we write, we read back.
	m, err := FindMirrors(fstest.MapFS{"etc/apt/sources.list.d/debian.sources": {Data: []byte(got)}}, "bookworm", "")
	if err != nil || m.Main != "http://m.example/debian" || m.Security != "http://m.example/debian-security" {
		t.Errorf("reading the written file back: %+v, %v", m, err)
	}
}

func FuzzParseAptSources(f *testing.F) {
	f.Add(debianSources)
	f.Add("deb [arch=amd64] http://x/debian bookworm main\n")
	f.Fuzz(func(t *testing.T, data string) {
		for _, s := range append(parseDeb822([]byte(data)), parseSourcesList([]byte(data))...) {
			if s.URI == "" {
				t.Errorf("source with empty URI from %q", data)
			}
		}
	})
}
