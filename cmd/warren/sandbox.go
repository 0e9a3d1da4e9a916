package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/warrenhq/warren/internal/httpedge"
)

const sandboxUsage = `Usage: warren sandbox <list|kill|pause|stop|resume> [flags] [ID...]

Subcommands:
  list                  list running and paused sandboxes
  kill ID...            kill sandboxes
  pause ID...           pause sandboxes (--memory=false stops them instead of freezing)
  stop ID...            move running or frozen sandboxes to disk, freeing their memory:
                        checkpointed under gVisor (processes and memory kept), else stopped
  resume ID...          resume paused sandboxes (--timeout sets how long they then run)

They talk to a running warren serve (--api-url, env E2B_API_URL; default
http://127.0.0.1:3000) with an API key (--api-key, env WARREN_API_KEY or E2B_API_KEY).`

// apiClient calls a Warren server's control plane.
type apiClient struct {
	url string
	key string
	hc  *http.Client
}

func (m *Main) runSandbox(ctx context.Context, args []string) error {
	sub, rest, err := m.subcommand(args, "sandbox", sandboxUsage, "list, kill, pause, stop or resume")
	if sub == "" {
		return err
	}
	fs := m.newFlagSet("sandbox "+sub, "warren sandbox "+sub+" [flags] [ID...]", sandboxUsage)
	c := &apiClient{hc: &http.Client{Timeout: 2 * time.Minute}}
	fs.StringVar(&c.url, "api-url", firstNonEmpty(m.Getenv("E2B_API_URL"), "http://127.0.0.1:3000"), "Warren server URL (env E2B_API_URL)")
	fs.StringVar(&c.key, "api-key", firstNonEmpty(m.Getenv("WARREN_API_KEY"), m.Getenv("E2B_API_KEY")), "API key (env WARREN_API_KEY or E2B_API_KEY)")
	memory := fs.Bool("memory", true, "pause: keep memory (freeze) rather than stop")
	timeout := fs.Duration("timeout", 5*time.Minute, "resume: how long the sandbox runs afterwards")
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if c.key == "" {
		return usageError{"no API key: set WARREN_API_KEY or pass --api-key"}
	}
	ids := fs.Args()
	switch sub {
	case "list":
		return m.listSandboxes(ctx, c)
	case "kill", "pause", "stop", "resume":
		if len(ids) == 0 {
			return usageError{fmt.Sprintf("sandbox %s needs at least one ID", sub)}
		}
	default:
		fmt.Fprintln(m.Stderr, sandboxUsage)
		return usageError{fmt.Sprintf("unknown sandbox subcommand %q", sub)}
	}
	var failed int
	for _, id := range ids {
		var err error
		p := "/sandboxes/" + url.PathEscape(id)
		done := map[string]string{"kill": "killed", "pause": "paused", "resume": "running"}[sub]
		switch sub {
		case "kill":
			_, err = c.do(ctx, "DELETE", p, nil, nil)
		case "pause":
			_, err = c.do(ctx, "POST", p+"/pause", map[string]bool{"memory": *memory}, nil)
		case "stop":
			var res struct {
				PauseMode string `json:"pauseMode"`
			}
			_, err = c.do(ctx, "POST", p+"/stop", nil, &res)
			done = "paused (" + res.PauseMode + ")"
		case "resume":
			_, err = c.do(ctx, "POST", p+"/connect", map[string]int64{"timeout": int64(timeout.Seconds())}, nil)
		}
		if err != nil {
			fmt.Fprintf(m.Stderr, "%s: %v\n", id, err)
			failed++
			continue
		}
		fmt.Fprintf(m.Stdout, "%s: %s\n", id, done)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d sandboxes failed", failed, len(ids))
	}
	return nil
}

func (m *Main) listSandboxes(ctx context.Context, c *apiClient) error {
	type listed struct {
		SandboxID  string            `json:"sandboxID"`
		TemplateID string            `json:"templateID"`
		State      string            `json:"state"`
		PauseMode  string            `json:"pauseMode"`
		StartedAt  time.Time         `json:"startedAt"`
		EndAt      time.Time         `json:"endAt"`
		Metadata   map[string]string `json:"metadata"`
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTEMPLATE\tSTATE\tSTARTED\tENDS\tMETADATA")
	token := ""
	for {
		q := url.Values{"state": {"running,paused"}, "limit": {"100"}}
		if token != "" {
			q.Set("nextToken", token)
		}
		var page []listed
		h, err := c.do(ctx, "GET", "/v2/sandboxes?"+q.Encode(), nil, &page)
		if err != nil {
			return err
		}
		for _, s := range page {
			var md []string
			for k, v := range s.Metadata {
				md = append(md, k+"="+v)
			}
			state := s.State
			if s.PauseMode != "" {
				state += " (" + s.PauseMode + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.SandboxID, s.TemplateID, state,
				s.StartedAt.Local().Format(time.DateTime), s.EndAt.Local().Format(time.DateTime), strings.Join(md, ","))
		}
		if token = h.Get("X-Next-Token"); token == "" {
			return tw.Flush()
		}
	}
}

// do sends a JSON request and decodes a JSON answer into out (if not
// nil); an error status becomes an error with the server's message.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.url, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-KEY", c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		var e httpedge.Body
		json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&e)
		return nil, fmt.Errorf("%s (HTTP %d)", firstNonEmpty(e.Message, res.Status), res.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return nil, fmt.Errorf("decode response: %w", err)
		}
	}
	return res.Header, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
