// Package javakernel is Warren's Java kernel as the code interpreter and
// the image builder share it: the source of the small program that runs
// Java code in JShell (JShellKernel.java, on the JDK's jdk.jshell API),
// the JVM options it runs with, where an image keeps it compiled, and the
// script that compiles it there. It does not start or talk to kernels
// (package codeinterp does) nor build images (package baseimage does).
package javakernel

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// Source is the kernel's Java source.
//
//go:embed JShellKernel.java
var Source []byte

const (
	// SourceFile is the name javac wants for Source.
	SourceFile = "JShellKernel.java"
	// MainClass is the kernel's class; snippets call its static methods
	// to set env vars.
	MainClass = "warren.JShellKernel"
	// installRoot holds one directory per kernel version in an image.
	installRoot = "/usr/local/lib/warren/jshell-kernel"
	// Jar and Archive are the names of the compiled kernel and of its
	// class data sharing archive in Dir.
	Jar     = "kernel.jar"
	Archive = "kernel.jsa"
)

// jvmOptions are the options every kernel JVM runs with, and the archive
// is made with (an archive made with other options is not used):
//   - the serial collector and the client compiler only: a REPL mostly
//     runs javac on small snippets, where C2's compile threads cost start-up
//     time and memory (about a second and 30 MB) without paying back;
//   - no JVM log lines (a stale archive's warning) in the user's output;
//   - java.util opened, so that the kernel can change the JVM's copy of
//     the environment behind System.getenv.
var jvmOptions = []string{
	"-XX:+UseSerialGC",
	"-XX:TieredStopAtLevel=1",
	"-Xlog:disable",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
}

// Hash names the kernel's version: its source and JVM options.
var Hash = func() string {
	sum := sha256.Sum256([]byte(string(Source) + "\x00" + strings.Join(jvmOptions, "\x00")))
	return hex.EncodeToString(sum[:8])
}()

// Dir is where an image keeps this version of the kernel, compiled. An
// agent only uses a kernel compiled from its own source.
var Dir = path.Join(installRoot, Hash)

// SourcePath is where the image builder puts Source, for BuildScript.
var SourcePath = path.Join(Dir, SourceFile)

// Command is the argv that runs the kernel from classPath (a jar or a
// directory of classes), using the class data sharing archive when it is
// not empty.
func Command(java, classPath, archive string) []string {
	argv := append([]string{java}, jvmOptions...)
	if archive != "" {
		argv = append(argv, "-XX:SharedArchiveFile="+archive)
	}
	return append(argv, "-cp", classPath, MainClass)
}

// warmUp is what the kernel runs while its class data sharing archive is
// recorded: the classes of a start, of compiling and running snippets, of
// output, errors and env vars.
var warmUp = []string{
	`{"id":1,"code":""}`,
	`{"id":2,"code":"int x = 1 + 1; x"}`,
	`{"id":3,"code":"System.out.println(\"hi\"); String s = \"a\"; s"}`,
	`{"id":4,"code":"void f() { throw new IllegalStateException(\"x\"); }\nf()"}`,
	`{"id":5,"code":"undefined + 1"}`,
	`{"id":6,"code":"` + MainClass + `.overrideEnv(\"A\", \"b\"); ` + MainClass + `.restoreEnv();"}`,
}

// BuildScript is the shell script that installs the kernel in an image
// that has a JDK and Source at SourcePath: it compiles it into Dir and
// records the class data sharing archive, which halves the JVM's start.
func BuildScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -e; d=%s; mkdir -p \"$d/classes\"; ", Dir)
	fmt.Fprintf(&b, "javac -nowarn -XDsuppressNotes -d \"$d/classes\" \"$d/%s\"; ", SourceFile)
	fmt.Fprintf(&b, "jar --create --file \"$d/%s\" -C \"$d/classes\" .; rm -rf \"$d/classes\"; ", Jar)
	argv := Command("java", "\"$d/"+Jar+"\"", "")
	argv = append(argv[:1], append([]string{"-XX:ArchiveClassesAtExit=\"$d/" + Archive + "\""}, argv[1:]...)...)
	fmt.Fprintf(&b, "printf '%%s\\n' %s | %s 3>/dev/null >/dev/null; ", shellQuoteAll(warmUp), strings.Join(argv, " "))
	fmt.Fprintf(&b, "test -s \"$d/%s\" && test -s \"$d/%s\"", Jar, Archive)
	return b.String()
}

func shellQuoteAll(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, "'"+strings.ReplaceAll(s, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}
