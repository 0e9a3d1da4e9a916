package baseimage

import (
	"archive/tar"
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A stand-in for the code interpreter's Java kernel, which cmd/warren
// passes (its test checks the real one's lines).
var (
	testKernel        = LayerFile{Path: "/usr/local/lib/warren/jshell-kernel/v1/JShellKernel.java", Mode: 0o644, Data: []byte("class K {}")}
	testKernelCompile = `set -e; javac -d /k "/usr/local/lib/warren/jshell-kernel/v1/JShellKernel.java"`
)

func TestCodeInterpreterRecipe(t *testing.T) {
	r := CodeInterpreterRecipe(testKernel, testKernelCompile)
	df := r.Dockerfile("sha256:abc")
	for _, want := range []string{
		"FROM sha256:abc\n",
		"apt-get install -y --no-install-recommends python3-munkres python3-ipykernel ",
		" node-typescript ",
		" r-base-core r-cran-irkernel ",
		" openjdk-17-jdk-headless ",
		"RUN printf 'path-exclude=%s\\n' '/usr/lib/jvm/*/jmods/*' > /etc/dpkg/dpkg.cfg.d/warren-excludes \\\n && apt-get update",
		"apt-get clean",
		"rm -rf /var/lib/apt/lists/*",
		"\nCOPY files/0 /usr/local/lib/warren/jshell-kernel/v1/JShellKernel.java\n",
		`RUN ["/bin/sh","-c","set -e; javac -d /k \"/usr/local/lib/warren/jshell-kernel/v1/JShellKernel.java\""]` + "\n",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	if r.hash("sha256:a") == r.hash("sha256:b") {
		t.Error("a rebuilt parent image does not change the recipe hash")
	}
	more := r
	more.Packages = append(slices.Clone(r.Packages), "r-recommended")
	if r.hash("sha256:a") != CodeInterpreterRecipe(testKernel, testKernelCompile).hash("sha256:a") || more.hash("sha256:a") == r.hash("sha256:a") {
		t.Error("the hash does not follow the package list")
	}
	for name, change := range map[string]func(*LayerRecipe){
		"excludes": func(r *LayerRecipe) { r.Excludes = nil },
		"files": func(r *LayerRecipe) {
			r.Files = []LayerFile{{Path: r.Files[0].Path, Mode: 0o644, Data: []byte("class X {}")}}
		},
		"script": func(r *LayerRecipe) { r.Script += "; true" },
	} {
		other := CodeInterpreterRecipe(testKernel, testKernelCompile)
		change(&other)
		if other.hash("sha256:a") == r.hash("sha256:a") {
			t.Errorf("the hash does not follow the %s", name)
		}
	}
	if plain := (LayerRecipe{Packages: []string{"curl"}}).Dockerfile("sha256:abc"); strings.Contains(plain, "COPY") || strings.Contains(plain, "path-exclude") || strings.Count(plain, "RUN") != 1 {
		t.Errorf("a recipe of packages only copies, excludes or runs something else:\n%s", plain)
	}
}

func TestLayerConfigNormalize(t *testing.T) {
	tests := []struct {
		name              string
		cfg               LayerConfig
		wantTag, wantFrom string
		wantErr           string
	}{
		{name: "defaults", cfg: LayerConfig{Tag: sandbox.CodeInterpreterImage}, wantTag: "warren/code-interpreter:latest", wantFrom: "warren/base:latest"},
		{name: "explicit", cfg: LayerConfig{Tag: "x/ci:dev", From: "x/base:dev"}, wantTag: "x/ci:dev", wantFrom: "x/base:dev"},
		{name: "bad tag", cfg: LayerConfig{Tag: "Bad/Name"}, wantErr: "not a valid image name"},
		{name: "no tag", cfg: LayerConfig{}, wantErr: "not a valid image name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.normalize()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("normalize error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Tag != tt.wantTag || got.From != tt.wantFrom {
				t.Errorf("normalize = %+v, %v; want tag %s from %s", got, err, tt.wantTag, tt.wantFrom)
			}
		})
	}
}

func TestMCPGatewayRecipe(t *testing.T) {
	r := MCPGatewayRecipe([]byte("gateway v1"))
	df := r.Dockerfile("sha256:abc")
	if want := "FROM sha256:abc\nCOPY files/0 /usr/local/bin/mcp-gateway\n"; df != want {
		t.Errorf("Dockerfile = %q, want %q (no apt-get without packages)", df, want)
	}
	if r.hash("sha256:a") == MCPGatewayRecipe([]byte("gateway v2")).hash("sha256:a") {
		t.Error("a rebuilt gateway binary does not change the recipe hash")
	}
	ctx, err := buildContext(r, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(ctx)
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		modes[h.Name] = h.Mode
	}
	if modes["files/0"] != 0o755 || modes["Dockerfile"] != 0o644 {
		t.Errorf("build context entries %v", modes)
	}
}

func TestDesktopRecipe(t *testing.T) {
	r := DesktopRecipe()
	df := r.Dockerfile("sha256:abc")
	for _, want := range []string{
		// What @e2b/desktop runs in the sandbox, by package.
		" xvfb ", " x11-utils ", " x11-xserver-utils ", " xdotool ", " scrot ", " xdg-utils ", " libgtk-3-bin ",
		" xfce4-session ", " xfdesktop4 ", " xfwm4 ", " x11vnc ", " novnc ", " websockify ", " net-tools",
		"apt-get install -y --no-install-recommends ",
		"'/usr/share/doc/*'",
		"\nCOPY files/0 /etc/xdg/autostart/warren-no-blanking.desktop\n",
		`ln -s /usr/share/novnc /opt/noVNC`,
		`test -x /opt/noVNC/utils/novnc_proxy`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	if slices.Contains(r.Packages, "xfce4") {
		t.Error("the xfce4 metapackage pulls in sound and volume management the desktop does not need")
	}
}
