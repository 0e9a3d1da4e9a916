package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Separator joins a server's prefix and a tool's or prompt's own name on
// the gateway: "<prefix>__<name>".
const Separator = "__"

// Version is what the gateway calls itself in the MCP handshake.
const Version = "1.0.0"

// Gateway is the aggregated MCP server: the stdio servers it started,
// behind one mcp.Server whose tools and prompts forward to them.
type Gateway struct {
	opts   Options
	log    *slog.Logger
	server *mcp.Server

	mu        sync.Mutex
	upstreams []*upstream // guarded by mu
}

// upstream is one started stdio server and the names it owns on the
// gateway.
type upstream struct {
	srv     Server
	session *mcp.ClientSession
	stderr  *tailBuffer
	// ended says why the server is gone, once it is; "" while it runs.
	ended atomic.Pointer[string]

	mu      sync.Mutex
	tools   []string // gateway names, guarded by mu
	prompts []string // gateway names, guarded by mu
}

// New makes a gateway with no servers yet; Start starts them.
func New(opts Options, log *slog.Logger) *Gateway {
	s := mcp.NewServer(&mcp.Implementation{Name: "warren-mcp-gateway", Version: Version}, &mcp.ServerOptions{
		Logger: log,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	return &Gateway{opts: opts, log: log, server: s}
}

// Server is the aggregated MCP server, to serve over a transport.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Start installs and starts every server, in parallel, and registers
// their tools, prompts and resources. It fails, stopping those it
// started, if any one does not come up: a gateway with a server missing
// would answer as if it did not exist.
func (g *Gateway) Start(ctx context.Context, servers []Server) error {
	ups := make([]*upstream, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { ups[i], errs[i] = g.start(ctx, s) })
	}
	wg.Wait()
	g.mu.Lock()
	for _, u := range ups {
		if u != nil {
			g.upstreams = append(g.upstreams, u)
		}
	}
	g.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		g.Close()
		return err
	}
	return nil
}

// start brings up one server and registers what it offers.
func (g *Gateway) start(ctx context.Context, s Server) (*upstream, error) {
	if err := Install(ctx, g.opts, s); err != nil {
		return nil, err
	}
	cmd, err := g.command(s)
	if err != nil {
		return nil, err
	}
	u := &upstream{srv: s, stderr: &tailBuffer{max: 2048}}
	cmd.Stderr = newTee(newLinePrefixer(g.opts.output(), s.Key), u.stderr)
	// Its own process group, so stopping it stops what its shell started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "warren-mcp-gateway", Version: Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			if err := g.syncTools(ctx, u); err != nil {
				g.log.Warn("refresh tools", "server", s.Key, "err", err)
			}
		},
		PromptListChangedHandler: func(ctx context.Context, _ *mcp.PromptListChangedRequest) {
			if err := g.syncPrompts(ctx, u); err != nil {
				g.log.Warn("refresh prompts", "server", s.Key, "err", err)
			}
		},
	})
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, g.startError(s, u, cmd, err)
	}
	u.session = session
	caps := session.InitializeResult().Capabilities
	var errs []error
	if caps == nil || caps.Tools != nil {
		errs = append(errs, g.syncTools(ctx, u))
	}
	if caps != nil && caps.Prompts != nil {
		errs = append(errs, g.syncPrompts(ctx, u))
	}
	if caps != nil && caps.Resources != nil {
		errs = append(errs, g.addResources(ctx, u))
	}
	if err := errors.Join(errs...); err != nil {
		_ = session.Close()
		return nil, fmt.Errorf("MCP server %q: %w", s.Key, err)
	}
	go func() {
		err := session.Wait()
		msg := fmt.Sprintf("MCP server %q has exited", s.Key)
		if err != nil {
			msg += fmt.Sprintf(" (%v)", err)
		}
		if t := strings.TrimSpace(u.stderr.String()); t != "" {
			msg += "; its stderr: " + t
		}
		u.ended.Store(&msg)
		g.log.Info("MCP server ended", "server", s.Key, "err", err, "stderr", u.stderr.String())
	}()
	g.log.Info("MCP server started", "server", s.Key, "prefix", s.Prefix, "tools", len(u.tools), "prompts", len(u.prompts))
	return u, nil
}

// startError says why a server did not answer the handshake, with what
// it wrote to stderr.
func (g *Gateway) startError(s Server, u *upstream, cmd *exec.Cmd, err error) error {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	msg := fmt.Sprintf("MCP server %q did not start (%s): %v", s.Key, describe(s), err)
	if t := u.stderr.String(); t != "" {
		msg += "; its stderr: " + t
	}
	return errors.New(msg)
}

func describe(s Server) string {
	if s.Repo != "" {
		return "runCmd " + s.RunCmd
	}
	return s.Catalog.Installer + " package " + s.Catalog.Package
}

// command is how s starts: a github server's runCmd in its clone, or a
// catalog package's executable with the arguments from its parameters.
func (g *Gateway) command(s Server) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if s.Repo != "" {
		cmd = exec.Command("bash", "-c", s.RunCmd)
		cmd.Dir = g.opts.cloneDir(s)
	} else {
		path, err := packageCommand(g.opts, s.Catalog)
		if err != nil {
			return nil, fmt.Errorf("MCP server %q: %w", s.Key, err)
		}
		cmd = exec.Command(path, s.Args...)
		cmd.Dir = filepath.Dir(path)
	}
	cmd.Env = environ(s.Env)
	return cmd, nil
}

// syncTools makes the gateway's tools of u what u lists now.
func (g *Gateway) syncTools(ctx context.Context, u *upstream) error {
	var tools []*mcp.Tool
	for t, err := range u.session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		tools = append(tools, t)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	g.server.RemoveTools(u.tools...)
	u.tools = u.tools[:0]
	for _, t := range tools {
		orig := t.Name
		gt := *t
		gt.Name = u.srv.Prefix + Separator + orig
		gt.InputSchema = objectSchema(t.InputSchema)
		if gt.OutputSchema != nil {
			if m, ok := gt.OutputSchema.(map[string]any); !ok || m["type"] != "object" {
				gt.OutputSchema = nil
			}
		}
		g.server.AddTool(&gt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// A server that is gone keeps its tools listed, and a call says
			// why it cannot be answered, as a tool error the model can read.
			if msg := u.ended.Load(); msg != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: *msg}}}, nil
			}
			return u.session.CallTool(ctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: orig, Arguments: req.Params.Arguments})
		})
		u.tools = append(u.tools, gt.Name)
	}
	return nil
}

// objectSchema is a tool's input schema as the gateway's server accepts
// it: an object schema, or the empty object schema for a server that gave
// none.
func objectSchema(s any) any {
	if m, ok := s.(map[string]any); ok && m["type"] == "object" {
		return m
	}
	return map[string]any{"type": "object"}
}

// syncPrompts makes the gateway's prompts of u what u lists now.
func (g *Gateway) syncPrompts(ctx context.Context, u *upstream) error {
	var prompts []*mcp.Prompt
	for p, err := range u.session.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("prompts/list: %w", err)
		}
		prompts = append(prompts, p)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	g.server.RemovePrompts(u.prompts...)
	u.prompts = u.prompts[:0]
	for _, p := range prompts {
		orig := p.Name
		gp := *p
		gp.Name = u.srv.Prefix + Separator + orig
		g.server.AddPrompt(&gp, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return u.session.GetPrompt(ctx, &mcp.GetPromptParams{Meta: req.Params.Meta, Name: orig, Arguments: req.Params.Arguments})
		})
		u.prompts = append(u.prompts, gp.Name)
	}
	return nil
}

// addResources registers u's resources and resource templates under their
// own URIs (a URI names what it is, so it keeps no prefix); a URI two
// servers both list stays with the first.
func (g *Gateway) addResources(ctx context.Context, u *upstream) error {
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return u.session.ReadResource(ctx, &mcp.ReadResourceParams{Meta: req.Params.Meta, URI: req.Params.URI})
	}
	for r, err := range u.session.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("resources/list: %w", err)
		}
		g.server.AddResource(r, read)
	}
	for t, err := range u.session.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("resources/templates/list: %w", err)
		}
		g.server.AddResourceTemplate(t, read)
	}
	return nil
}

// Tools lists the gateway's tool names, sorted.
func (g *Gateway) Tools() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for _, u := range g.upstreams {
		u.mu.Lock()
		names = append(names, u.tools...)
		u.mu.Unlock()
	}
	slices.Sort(names)
	return names
}

// Close stops every server.
func (g *Gateway) Close() error {
	g.mu.Lock()
	ups := g.upstreams
	g.upstreams = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range ups {
		if u.session != nil {
			wg.Go(func() { _ = u.session.Close() })
		}
	}
	wg.Wait()
	return nil
}
