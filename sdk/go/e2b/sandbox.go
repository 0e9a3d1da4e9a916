package e2b

import (
	"context"
	"net/http"
	"time"
)

// DefaultTemplate is the template of a sandbox created without one; MCPTemplate of one
// created with an MCP configuration.
const (
	DefaultTemplate = "base"
	MCPTemplate     = "mcp-gateway"
)

// Sandbox is a connection to one sandbox: its control-plane calls and, through Commands,
// Files and Pty, its agent. It is safe for concurrent use.
type Sandbox struct {
	// ID names the sandbox.
	ID string
	// Domain is the sandbox's domain (the server's answer, else the client's).
	Domain string
	// EnvdVersion is the version of the agent inside the sandbox.
	EnvdVersion string
	// TrafficAccessToken must be sent (header e2b-traffic-access-token) to the sandbox's
	// ports when it was created with NetworkOptions.AllowPublicTraffic false; "" otherwise.
	TrafficAccessToken string

	Commands *Commands
	Files    *Filesystem
	Pty      *Pty
	Git      *Git

	client *Client
	envd   *envdConn
	mcp    mcpState
}

// SandboxOptions configures a new sandbox. The zero value creates one from DefaultTemplate
// with the server's defaults.
type SandboxOptions struct {
	// Template is the template's ID, name or name:tag, or a snapshot's ID; default "base".
	Template string
	// Timeout is how long the sandbox lives before its timeout action; 0 leaves the server's
	// default (300 s).
	Timeout time.Duration
	// Metadata is kept with the sandbox, reported by GetInfo and List and usable as a filter.
	Metadata map[string]string
	// Envs are environment variables of every process in the sandbox.
	Envs map[string]string
	// Secure, when false, asks for a sandbox whose agent takes no access token (the v1
	// endpoint; E2B's v2 always secures). nil and true secure it.
	Secure *bool
	// AllowInternetAccess false denies all outbound traffic; nil leaves the server's default.
	AllowInternetAccess *bool
	// Network configures egress and ingress.
	Network *NetworkOptions
	// Lifecycle chooses the timeout action (kill or pause) and auto-resume.
	Lifecycle *Lifecycle
	// VolumeMounts mounts volumes: mount path → volume name.
	VolumeMounts map[string]string
	// IAM asks for workload identity tokens, by name.
	IAM map[string]IAMToken
	// MCP configures the MCP gateway (E2B's mcp option: server name → its settings). It
	// needs a template with the gateway; without Template, "mcp-gateway" is used. Create
	// starts the gateway and fails (killing the sandbox) when it does not start.
	MCP map[string]any
}

// IAMToken asks for a workload identity token.
type IAMToken struct {
	Audience  string `json:"audience"`
	TokenType string `json:"tokenType"` // JWT-SVID
}

// Lifecycle says what happens to a sandbox at its timeout.
type Lifecycle struct {
	// OnTimeout is "kill" (the default) or "pause" (the old autoPause).
	OnTimeout string
	// KeepMemory, with OnTimeout "pause", chooses a pause that keeps memory (nil or true) or
	// one that keeps only the filesystem (false).
	KeepMemory *bool
	// AutoResume resumes a paused sandbox on traffic to it; needs OnTimeout "pause".
	AutoResume *bool
}

// ConnectOptions configures Connect.
type ConnectOptions struct {
	// Timeout extends (never shortens) the sandbox's life to at least this from now; 0
	// leaves the server's default (300 s).
	Timeout time.Duration
	// Reboot resumes a paused sandbox from its filesystem only (memory dropped).
	Reboot bool
}

// sandboxResponse is the control plane's answer to create, connect and fork.
type sandboxResponse struct {
	SandboxID          string `json:"sandboxID"`
	TemplateID         string `json:"templateID"`
	EnvdVersion        string `json:"envdVersion"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
	Domain             string `json:"domain,omitempty"`
}

type newSandboxBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *NetworkOptions   `json:"network,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *autoResume       `json:"autoResume,omitempty"`
	VolumeMounts        []VolumeMount     `json:"volumeMounts,omitempty"`
	IAM                 *iamBody          `json:"iam,omitempty"`
	MCP                 map[string]any    `json:"mcp,omitempty"`
}

type iamBody struct {
	Tokens map[string]IAMToken `json:"tokens"`
}

type autoResume struct {
	Enabled bool `json:"enabled"`
}

// Create creates a sandbox and connects to it.
func (c *Client) Create(ctx context.Context, opts SandboxOptions) (*Sandbox, error) {
	if c.cfg.Debug {
		return c.newSandbox(sandboxResponse{SandboxID: "debug_sandbox_id", EnvdVersion: envdDebugVersion}), nil
	}
	body, err := opts.body()
	if err != nil {
		return nil, err
	}
	path := "/v2/sandboxes"
	if opts.Secure != nil && !*opts.Secure {
		path = "/sandboxes"
	}
	r, err := c.call(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return nil, err
	}
	if !r.ok() {
		return nil, r.err()
	}
	var sr sandboxResponse
	if err := r.decode(&sr); err != nil {
		return nil, err
	}
	if versionBefore(sr.EnvdVersion, "0.1.0") {
		c.Kill(ctx, sr.SandboxID)
		return nil, &TemplateError{sandboxErr(0, "You need to update the template to use the new SDK.", nil)}
	}
	sbx := c.newSandbox(sr)
	if opts.MCP != nil {
		if err := sbx.startMCP(ctx, opts.MCP); err != nil {
			sbx.Kill(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return sbx, nil
}

func (o SandboxOptions) body() (*newSandboxBody, error) {
	b := &newSandboxBody{
		TemplateID:          o.Template,
		Timeout:             seconds(o.Timeout),
		Metadata:            o.Metadata,
		EnvVars:             o.Envs,
		AllowInternetAccess: o.AllowInternetAccess,
		Network:             o.Network,
	}
	if o.Network != nil && o.Network.Rules != nil {
		registered := o.IAM
		if registered == nil {
			registered = map[string]IAMToken{}
		}
		rules, err := resolveRules(o.Network.Rules, registered)
		if err != nil {
			return nil, err
		}
		n := *o.Network
		n.Rules = rules
		b.Network = &n
	}
	switch {
	case b.TemplateID != "":
	case o.MCP != nil:
		b.TemplateID = MCPTemplate
	default:
		b.TemplateID = DefaultTemplate
	}
	if o.IAM != nil {
		b.IAM = &iamBody{Tokens: o.IAM}
	}
	b.MCP = o.MCP
	if o.Secure != nil && !*o.Secure {
		b.Secure = o.Secure
	}
	for path, name := range o.VolumeMounts {
		b.VolumeMounts = append(b.VolumeMounts, VolumeMount{Name: name, Path: path})
	}
	if l := o.Lifecycle; l != nil {
		if err := l.apply(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (l *Lifecycle) apply(b *newSandboxBody) error {
	pause := l.OnTimeout == "pause"
	switch {
	case l.OnTimeout != "" && l.OnTimeout != "pause" && l.OnTimeout != "kill":
		return invalidArg("Lifecycle.OnTimeout must be one of: pause, kill (got %q)", l.OnTimeout)
	case l.KeepMemory != nil && !pause:
		return invalidArg("Lifecycle.KeepMemory is only allowed when OnTimeout is pause")
	case l.AutoResume != nil && *l.AutoResume && !pause:
		return invalidArg("Lifecycle.AutoResume can only be true when OnTimeout is pause")
	case l.AutoResume != nil && *l.AutoResume && l.KeepMemory != nil && !*l.KeepMemory:
		return invalidArg("Lifecycle.AutoResume cannot be true with KeepMemory false: a filesystem-only snapshot must be resumed explicitly with Connect")
	}
	if l.OnTimeout != "" {
		b.AutoPause = &pause
	}
	if pause {
		b.AutoPauseMemory = l.KeepMemory
	}
	if l.AutoResume != nil {
		b.AutoResume = &autoResume{Enabled: *l.AutoResume}
	}
	return nil
}

// Connect connects to a sandbox, resuming it when it is paused. Its life is extended (never
// shortened) to opts.Timeout from now.
func (c *Client) Connect(ctx context.Context, sandboxID string, opts ConnectOptions) (*Sandbox, error) {
	if c.cfg.Debug {
		return c.newSandbox(sandboxResponse{SandboxID: sandboxID, EnvdVersion: envdDebugVersion}), nil
	}
	body := map[string]any{}
	if opts.Timeout > 0 {
		body["timeout"] = seconds(opts.Timeout)
	}
	if opts.Reboot {
		body["memory"] = false
	}
	r, err := c.call(ctx, http.MethodPost, "/v2"+sandboxPath(sandboxID, "/connect"), nil, body)
	if err != nil {
		return nil, err
	}
	if r.code() == http.StatusNotFound {
		return nil, &SandboxNotFoundError{NotFoundError{sandboxErr(http.StatusNotFound, "Paused sandbox "+sandboxID+" not found", nil)}}
	}
	if !r.ok() {
		return nil, r.err()
	}
	var sr sandboxResponse
	if err := r.decode(&sr); err != nil {
		return nil, err
	}
	return c.newSandbox(sr), nil
}

func (c *Client) newSandbox(sr sandboxResponse) *Sandbox {
	domain := sr.Domain
	if domain == "" {
		domain = c.cfg.Domain
	}
	e := newEnvdConn(&c.cfg, sr.SandboxID, domain, sr.EnvdVersion, sr.EnvdAccessToken)
	commands := &Commands{e: e}
	return &Sandbox{
		ID:                 sr.SandboxID,
		Domain:             domain,
		EnvdVersion:        sr.EnvdVersion,
		TrafficAccessToken: sr.TrafficAccessToken,
		Commands:           commands,
		Files:              &Filesystem{e: e},
		Pty:                &Pty{e: e},
		Git:                &Git{c: commands},
		client:             c,
		envd:               e,
	}
}

// Connect resumes the sandbox when it is paused and extends its life as Client.Connect does.
func (s *Sandbox) Connect(ctx context.Context, opts ConnectOptions) error {
	_, err := s.client.Connect(ctx, s.ID, opts)
	return err
}

// Kill kills the sandbox; false when it was already gone.
func (s *Sandbox) Kill(ctx context.Context) (bool, error) { return s.client.Kill(ctx, s.ID) }

// SetTimeout makes the sandbox end timeout from now.
func (s *Sandbox) SetTimeout(ctx context.Context, timeout time.Duration) error {
	return s.client.SetTimeout(ctx, s.ID, timeout)
}

// GetInfo returns what the control plane knows about the sandbox.
func (s *Sandbox) GetInfo(ctx context.Context) (*SandboxInfo, error) {
	return s.client.GetInfo(ctx, s.ID)
}

// Pause pauses the sandbox; false when it was already paused.
func (s *Sandbox) Pause(ctx context.Context, opts PauseOptions) (bool, error) {
	return s.client.Pause(ctx, s.ID, opts)
}

// GetMetrics returns samples of the sandbox's resource use.
func (s *Sandbox) GetMetrics(ctx context.Context, opts MetricsOptions) ([]SandboxMetrics, error) {
	return s.client.GetMetrics(ctx, s.ID, opts)
}

// UpdateNetwork replaces the sandbox's egress rules.
func (s *Sandbox) UpdateNetwork(ctx context.Context, update NetworkUpdate) error {
	return s.client.UpdateNetwork(ctx, s.ID, update)
}

// EnvdAccessToken is the access token of a secured sandbox's agent ("" for one created with
// Secure false), for GetSignature. Whoever holds it controls the sandbox.
func (s *Sandbox) EnvdAccessToken() string { return s.envd.token }

// IsRunning says whether the sandbox's agent answers; false when the sandbox is paused or
// gone.
func (s *Sandbox) IsRunning(ctx context.Context) (bool, error) { return s.envd.health(ctx) }

// Host is the host name of a port of the sandbox: <port>-<id>.<domain>, or localhost:<port>
// in debug mode.
func (s *Sandbox) Host(port int) string {
	if s.client.cfg.Debug {
		return host("", port, "")
	}
	return host(s.ID, port, s.Domain)
}
