package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/web"
)

// serverChecks are the dashboard server view's checks: what `warren
// doctor` checks, as the running server sees it.
func serverChecks(cfg serveConfig, rt sandbox.Runtime) func(ctx context.Context) []web.Check {
	return func(ctx context.Context) []web.Check {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var out []web.Check
		add := func(name string, optional bool, msg string, err error) {
			c := web.Check{Name: name, OK: err == nil, Message: msg}
			if err != nil {
				c.Message, c.Warning = err.Error(), optional
			}
			out = append(out, c)
		}
		if p, ok := rt.(sandbox.Pinger); ok {
			v, err := p.Ping(ctx)
			add("docker engine", false, "reachable, API version "+v, err)
		}
		for _, img := range []struct {
			name, ref, fix string
			optional       bool
		}{
			{"base image", cfg.Lifecycle.BaseImage, "warren image build", false},
			{"code interpreter", cfg.Lifecycle.CodeInterpreterImage, "warren image build code-interpreter", true},
			{"mcp gateway", cfg.Lifecycle.MCPGatewayImage, "warren image build mcp-gateway", true},
			{"desktop", cfg.Lifecycle.DesktopImage, "warren image build desktop", true},
		} {
			ok, err := rt.ImageExists(ctx, img.ref)
			if err == nil && !ok {
				err = fmt.Errorf("%s is missing; build it with: %s", img.ref, img.fix)
			}
			add(img.name, img.optional, img.ref+" is present", err)
		}
		switch cfg.Firewall {
		case "off":
			add("firewall", true, "", fmt.Errorf("off: sandboxes can reach the host and each other, and egress rules are refused"))
		default:
			add("firewall", false, "iptables: sandboxes are isolated and egress rules enforced", nil)
		}
		fi, err := os.Stat(cfg.AgentPath)
		if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
			err = fmt.Errorf("%s is not an executable file", cfg.AgentPath)
		}
		add("agent binary", false, cfg.AgentPath, err)
		f, err := os.CreateTemp(cfg.StateDir, ".dashboard-check-*")
		if err == nil {
			f.Close()
			os.Remove(f.Name())
		}
		add("state directory", false, filepath.Clean(cfg.StateDir)+" is writable", err)
		add("runtime", false, cfg.Runtime+": the engine ran a container under it at start", nil)
		return out
	}
}
