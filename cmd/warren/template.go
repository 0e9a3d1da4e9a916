package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/warrenhq/warren/internal/template"
)

func (m *Main) runTemplate(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "build" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(m.Stdout, "Usage: warren template build -f Dockerfile --name NAME [context dir]\n")
			return nil
		}
		return usageError{"usage: warren template build -f Dockerfile --name NAME [context dir]"}
	}
	fs := m.newFlagSet("template build", "warren template build -f Dockerfile --name NAME [context dir]",
		"Build a template from a Dockerfile on a running warren serve, through its E2B API, showing\n"+
			"the build's progress. Sandboxes then start from it with Sandbox.create(NAME).")
	file := fs.String("f", "Dockerfile", "the Dockerfile")
	name := fs.String("name", "", "template name, optionally name:tag (required)")
	cpus := fs.Int("cpu-count", 0, "CPUs of the template's sandboxes (0 = server default)")
	mem := fs.Int("memory-mb", 0, "memory of the template's sandboxes in MiB (0 = server default)")
	force := fs.Bool("no-cache", false, "rebuild every step")
	c := &apiClient{hc: &http.Client{Timeout: 10 * time.Minute}}
	fs.StringVar(&c.url, "api-url", firstNonEmpty(m.Getenv("E2B_API_URL"), "http://127.0.0.1:3000"), "Warren server URL (env E2B_API_URL)")
	fs.StringVar(&c.key, "api-key", firstNonEmpty(m.Getenv("WARREN_API_KEY"), m.Getenv("E2B_API_KEY")), "API key (env WARREN_API_KEY or E2B_API_KEY)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *name == "" {
		return usageError{"--name is required"}
	}
	dir := "."
	if fs.NArg() > 1 {
		return usageError{"at most one context directory"}
	}
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	if c.key == "" {
		return usageError{"no API key: set WARREN_API_KEY or pass --api-key"}
	}
	var archive bytes.Buffer
	if err := template.WriteUpload(&archive, dir); err != nil {
		return fmt.Errorf("archive the build context: %w", err)
	}
	ctxTar := archive.Bytes()
	sum := sha256.Sum256(ctxTar)
	hash := hex.EncodeToString(sum[:])
	spec, warnings, err := template.ParseDockerfile(string(text), hash)
	if err != nil {
		return err
	}
	spec.Force = *force
	for _, w := range warnings {
		fmt.Fprintln(m.Stderr, "warning:", w)
	}
	var req struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	body := map[string]any{"name": *name}
	if *cpus > 0 {
		body["cpuCount"] = *cpus
	}
	if *mem > 0 {
		body["memoryMB"] = *mem
	}
	if _, err := c.do(ctx, "POST", "/v3/templates", body, &req); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Building %s (template %s, build %s)\n", *name, req.TemplateID, req.BuildID)
	if hasCopy(spec) {
		var up struct {
			Present bool   `json:"present"`
			URL     string `json:"url"`
		}
		if _, err := c.do(ctx, "GET", "/templates/"+req.TemplateID+"/files/"+hash, nil, &up); err != nil {
			return err
		}
		if !up.Present {
			fmt.Fprintf(m.Stdout, "Uploading the build context (%d bytes)\n", len(ctxTar))
			if err := putUpload(ctx, c.hc, up.URL, ctxTar); err != nil {
				return err
			}
		}
	}
	if _, err := c.do(ctx, "POST", "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, spec, nil); err != nil {
		return err
	}
	return m.followBuild(ctx, c, req.TemplateID, req.BuildID)
}

func hasCopy(spec template.BuildSpec) bool {
	for _, s := range spec.Steps {
		if s.Type == template.StepCopy {
			return true
		}
	}
	return false
}

// followBuild prints the build's log as it grows until the build ends.
func (m *Main) followBuild(ctx context.Context, c *apiClient, tplID, buildID string) error {
	offset := 0
	for {
		var st struct {
			Status     string `json:"status"`
			LogEntries []struct {
				Message string `json:"message"`
				Step    string `json:"step"`
			} `json:"logEntries"`
			Reason *struct {
				Message string `json:"message"`
				Step    string `json:"step"`
			} `json:"reason"`
		}
		q := fmt.Sprintf("/templates/%s/builds/%s/status?logsOffset=%d", tplID, buildID, offset)
		if _, err := c.do(ctx, "GET", q, nil, &st); err != nil {
			return err
		}
		for _, e := range st.LogEntries {
			fmt.Fprintf(m.Stdout, "[%s] %s\n", e.Step, e.Message)
		}
		offset += len(st.LogEntries)
		switch {
		case st.Status == "ready" && len(st.LogEntries) == 0:
			fmt.Fprintln(m.Stdout, "Template ready.")
			return nil
		case st.Status == "error" && len(st.LogEntries) == 0:
			if st.Reason != nil && st.Reason.Step != "" {
				return fmt.Errorf("build failed at step %s: %s", st.Reason.Step, st.Reason.Message)
			}
			if st.Reason != nil {
				return fmt.Errorf("build failed: %s", st.Reason.Message)
			}
			return fmt.Errorf("build failed")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// putUpload sends a build context to the upload URL the server gave.
func putUpload(ctx context.Context, hc *http.Client, rawURL string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", rawURL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("upload: %s: %s", resp.Status, msg)
	}
	return nil
}
