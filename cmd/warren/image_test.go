package main

import (
	"strings"
	"testing"
)

// The code interpreter's image compiles the code interpreter's own Java
// kernel: its source is copied in and compiled, with its class data
// sharing archive recorded.
func TestCodeInterpreterRecipe(t *testing.T) {
	df := codeInterpreterRecipe().Dockerfile("sha256:abc")
	for _, want := range []string{
		" openjdk-17-jdk-headless ",
		"\nCOPY files/0 /usr/local/lib/warren/jshell-kernel/",
		`/JShellKernel.java` + "\n",
		`RUN ["/bin/sh","-c","set -e; d=/usr/local/lib/warren/jshell-kernel/`,
		`javac -nowarn -XDsuppressNotes -d \"$d/classes\" \"$d/JShellKernel.java\";`,
		`-XX:ArchiveClassesAtExit=\"$d/kernel.jsa\"`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
}
