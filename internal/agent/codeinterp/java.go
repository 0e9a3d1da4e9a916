package codeinterp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/warrenhq/warren/internal/agent/codeinterp/javakernel"
)

// javaCommand is the argv of a Java kernel: the one compiled into the
// image (warren/code-interpreter), or else one this server compiles once
// with the JDK's javac, so that any image with a JDK runs Java too.
func (s *Server) javaCommand(ctx context.Context) ([]string, error) {
	jar := filepath.Join(javakernel.Dir, javakernel.Jar)
	if _, err := os.Stat(jar); err == nil {
		archive := filepath.Join(javakernel.Dir, javakernel.Archive)
		if _, err := os.Stat(archive); err != nil {
			archive = ""
		}
		return javakernel.Command(s.cfg.Java, jar, archive), nil
	}
	classes, err := s.compileJavaKernel(ctx)
	if err != nil {
		return nil, err
	}
	return javakernel.Command(s.cfg.Java, classes, ""), nil
}

// compileJavaKernel compiles the kernel into the runtime directory, the
// first time it is needed; a failure is retried by the next start.
func (s *Server) compileJavaKernel(ctx context.Context) (string, error) {
	s.javaMu.Lock()
	defer s.javaMu.Unlock()
	dir := filepath.Join(s.runtimeDir, "jshell-kernel")
	if s.javaCompiled {
		return dir, nil
	}
	javac := "javac"
	if filepath.IsAbs(s.cfg.Java) {
		javac = filepath.Join(filepath.Dir(s.cfg.Java), "javac")
	}
	src := filepath.Join(s.runtimeDir, javakernel.SourceFile)
	if err := os.WriteFile(src, javakernel.Source, 0o644); err != nil {
		return "", fmt.Errorf("write the Java kernel: %w", err)
	}
	out, err := exec.CommandContext(ctx, javac, "-nowarn", "-XDsuppressNotes", "-d", dir, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compile the Java kernel with %s (Java needs a JDK: apt-get install openjdk-17-jdk-headless): %w: %s", javac, err, out)
	}
	// Kernels may run as another user, who must read the classes whatever
	// the agent's umask.
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}); err != nil {
		return "", fmt.Errorf("compile the Java kernel: %w", err)
	}
	s.javaCompiled = true
	return dir, nil
}
