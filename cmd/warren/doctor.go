package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/firewall"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

// check is one doctor check: a name and what it found. An optional
// check's failure is a warning: serve runs without it, but some feature
// does not.
type check struct {
	name     string
	optional bool
	run      func(ctx context.Context) (string, error)
}

func (m *Main) runDoctor(ctx context.Context, args []string) error {
	fs := m.newFlagSet("doctor", "warren doctor [flags]",
		"Check what warren serve needs: the Docker engine, the base image, the agent binary,\n"+
			"a free port, a writable state directory and, unless --firewall=off, a usable iptables;\n"+
			"the runtime (--runtime=gvisor: runsc registered, experimental mode, a container runs);\n"+
			"and the code interpreter's image, which only the code-interpreter-v1 template needs (a\n"+
			"warning). Every check runs; any failure exits non-zero. Flags take serve's values.")
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var cfg serveConfig
	m.sharedServeFlags(e, &cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	addr, stateDir, agent, fw, gvName := cfg.Addr, cfg.StateDir, cfg.AgentPath, cfg.Firewall, cfg.GVisorName
	image, ciImage, mcpImage, desktopImage := cfg.Lifecycle.BaseImage, cfg.Lifecycle.CodeInterpreterImage, cfg.Lifecycle.MCPGatewayImage, cfg.Lifecycle.DesktopImage
	if fw != "iptables" && fw != "off" {
		return usageError{fmt.Sprintf("--firewall=%q: want iptables or off", fw)}
	}
	rt, err := sandbox.ParseOCIRuntime(cfg.Runtime)
	if err != nil {
		return usageError{"--runtime: " + sandbox.Message(err)}
	}
	buildBase := "warren image build"
	if image != sandbox.BaseImage {
		buildBase += " --tag " + image
	}
	buildCI := "warren image build code-interpreter"
	if ciImage != sandbox.CodeInterpreterImage {
		buildCI += " --tag " + ciImage
	}
	if image != sandbox.BaseImage {
		buildCI += " --from " + image
	}
	buildMCP := "warren image build mcp-gateway"
	if mcpImage != sandbox.MCPGatewayImage {
		buildMCP += " --tag " + mcpImage
	}
	if image != sandbox.BaseImage {
		buildMCP += " --from " + image
	}
	buildDesktop := "warren image build desktop"
	if desktopImage != sandbox.DesktopImage {
		buildDesktop += " --tag " + desktopImage
	}
	if image != sandbox.BaseImage {
		buildDesktop += " --from " + image
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	// eng is the engine's adapter once the first check reached it.
	var eng *docker.Runtime
	checks := []check{
		{"docker engine", false, func(ctx context.Context) (string, error) {
			rt, err := docker.Open(docker.Config{GVisorRuntime: gvName})
			if err != nil {
				return "", err
			}
			v, err := rt.Ping(ctx)
			if err != nil {
				rt.Close()
				return "", err
			}
			eng = rt
			return "reachable, API version " + v, nil
		}},
		{"base image", false, func(ctx context.Context) (string, error) {
			return imagePresent(ctx, eng, image, "build it with: "+buildBase+" (as root)")
		}},
		{"code interpreter", true, func(ctx context.Context) (string, error) {
			return imagePresent(ctx, eng, ciImage, "only the code-interpreter-v1 template needs it; build it with: "+buildCI)
		}},
		{"MCP gateway", true, func(ctx context.Context) (string, error) {
			return imagePresent(ctx, eng, mcpImage, "only the mcp-gateway template (Sandbox.create({ mcp })) needs it; build it with: "+buildMCP)
		}},
		{"desktop", true, func(ctx context.Context) (string, error) {
			return imagePresent(ctx, eng, desktopImage, "only the desktop template (@e2b/desktop) needs it; build it with: "+buildDesktop)
		}},
		{"firewall", false, func(ctx context.Context) (string, error) {
			if fw == "off" {
				return "off: sandboxes can reach the host and each other, and egress rules are refused", nil
			}
			if err := firewall.Check(ctx); err != nil {
				return "", fmt.Errorf("%w (warren serve --firewall=off runs without it)", err)
			}
			return "iptables works: sandboxes are isolated and egress rules enforced", nil
		}},
		{"agent binary", false, func(context.Context) (string, error) {
			fi, err := os.Stat(agent)
			if err != nil {
				return "", err
			}
			if fi.IsDir() || fi.Mode()&0o111 == 0 {
				return "", fmt.Errorf("%s is not an executable file", agent)
			}
			return agent, nil
		}},
		{"listen address", false, func(context.Context) (string, error) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return "", err
			}
			ln.Close()
			return addr + " is free", nil
		}},
		{"state directory", false, func(context.Context) (string, error) {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return "", err
			}
			f, err := os.CreateTemp(stateDir, ".doctor-*")
			if err != nil {
				return "", err
			}
			f.Close()
			os.Remove(f.Name())
			return filepath.Clean(stateDir) + " is writable", nil
		}},
	}
	checks = append(checks, runtimeChecks(rt, gvName, image, &eng)...)
	failed := 0
	for _, c := range checks {
		msg, err := c.run(ctx)
		switch {
		case err == nil:
			fmt.Fprintf(m.Stdout, "ok    %-16s %s\n", c.name, msg)
		case c.optional:
			fmt.Fprintf(m.Stdout, "WARN  %-16s %v\n", c.name, err)
		default:
			failed++
			fmt.Fprintf(m.Stdout, "FAIL  %-16s %v\n", c.name, err)
		}
	}
	if eng != nil {
		eng.Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(checks))
	}
	return nil
}

// imagePresent checks that the engine eng has image; fix says what to do
// when it does not.
func imagePresent(ctx context.Context, eng *docker.Runtime, image, fix string) (string, error) {
	if eng == nil {
		return "", errors.New("cannot check without the docker engine")
	}
	ok, err := eng.ImageExists(ctx, image)
	if err != nil {
		return "", fmt.Errorf("%s: %w", image, err)
	}
	if !ok {
		return "", fmt.Errorf("%s is missing: %s", image, fix)
	}
	return image + " present", nil
}
