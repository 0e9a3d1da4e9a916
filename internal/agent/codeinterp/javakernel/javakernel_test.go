package javakernel

import (
	"slices"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	tests := []struct {
		name             string
		classPath, jsa   string
		want, wantAbsent string
	}{
		{name: "image", classPath: Dir + "/" + Jar, jsa: Dir + "/" + Archive, want: "-XX:SharedArchiveFile=" + Dir + "/" + Archive},
		{name: "compiled here", classPath: "/tmp/k", wantAbsent: "-XX:SharedArchiveFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := Command("/usr/bin/java", tt.classPath, tt.jsa)
			joined := strings.Join(argv, " ")
			if argv[0] != "/usr/bin/java" || !slices.Equal(argv[len(argv)-3:], []string{"-cp", tt.classPath, MainClass}) {
				t.Errorf("argv %q: want java first and -cp %s %s last", argv, tt.classPath, MainClass)
			}
			if tt.want != "" && !slices.Contains(argv, tt.want) {
				t.Errorf("argv %q lacks %s", argv, tt.want)
			}
			if tt.wantAbsent != "" && strings.Contains(joined, tt.wantAbsent) {
				t.Errorf("argv %q has %s", argv, tt.wantAbsent)
			}
			if !slices.Contains(argv, "--add-opens=java.base/java.util=ALL-UNNAMED") {
				t.Errorf("argv %q does not open java.util for the environment", argv)
			}
		})
	}
}

// TestBuildScript checks that the image compiles the kernel where an agent
// of this version looks for it, and records its archive with the options
// the kernel runs with (an archive made with others is not used).
func TestBuildScript(t *testing.T) {
	s := BuildScript()
	if !strings.HasPrefix(Dir, installRoot+"/") || !strings.Contains(s, "d="+Dir+";") {
		t.Errorf("script does not install into %s:\n%s", Dir, s)
	}
	run := strings.Join(Command("java", `"$d/`+Jar+`"`, ""), " ")
	if !strings.Contains(s, strings.Replace(run, "java ", `java -XX:ArchiveClassesAtExit="$d/`+Archive+`" `, 1)) {
		t.Errorf("script does not record the archive running %s:\n%s", run, s)
	}
	if !strings.HasSuffix(s, `test -s "$d/`+Jar+`" && test -s "$d/`+Archive+`"`) {
		t.Errorf("script does not check its output:\n%s", s)
	}
}
