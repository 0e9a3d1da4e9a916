package e2b

import (
	"net/http"
	"os"
	"strings"
	"time"
)

// Defaults of a Client, the same as the official SDKs'.
const (
	DefaultDomain         = "e2b.app"
	DefaultRequestTimeout = 60 * time.Second
	DefaultRetries        = 3
	// DefaultSandboxTimeout is how long a sandbox lives when created or connected without a
	// timeout of its own (the server applies it).
	DefaultSandboxTimeout = 300 * time.Second
	// DefaultCommandTimeout bounds a command (and a watch) started without a timeout.
	DefaultCommandTimeout = 60 * time.Second

	// NoTimeout, as a command's or a terminal's Timeout, sets no limit.
	NoTimeout time.Duration = -1

	envdPort = 49983
)

// Config is what a Client needs to reach the control plane and the sandboxes. NewClient fills
// it from the environment first (the variables E2B's SDKs read), then applies the options.
type Config struct {
	// APIKey authenticates control-plane calls (X-API-KEY). Env E2B_API_KEY. Required for
	// every call that reaches the control plane.
	APIKey string
	// AccessToken is sent as a Bearer token to the control plane when set (the E2B CLI's
	// token). Env E2B_ACCESS_TOKEN.
	AccessToken string
	// Domain of the sandboxes and of the default API URL. Env E2B_DOMAIN; default e2b.app.
	Domain string
	// APIURL is the control plane's base URL. Env E2B_API_URL; default https://api.<Domain>,
	// or http://localhost:3000 in debug mode.
	APIURL string
	// SandboxURL, when set, is the one base URL of every sandbox's agent: requests name the
	// sandbox and port in the E2b-Sandbox-Id and E2b-Sandbox-Port headers. Env E2B_SANDBOX_URL;
	// empty means https://49983-<id>.<domain> (or the shared host of E2B's own domains).
	SandboxURL string
	// VolumeAPIURL is the base URL of the volume content API. Env E2B_VOLUME_API_URL;
	// default APIURL.
	VolumeAPIURL string
	// Debug talks to an agent on localhost:49983 with no control plane. Env E2B_DEBUG=true.
	Debug bool
	// RequestTimeout bounds each control-plane request and each unary agent call; default
	// 60 s, a negative value means none. The context's deadline applies too.
	RequestTimeout time.Duration
	// Retries is how many times a request refused with 429 or 503 carrying Retry-After, or
	// an idempotent one whose connection broke, is tried again; default 3, negative means 0.
	Retries int
	// Headers are added to every control-plane request.
	Headers http.Header
	// HTTPClient carries every request; default a client of its own with HTTP keep-alives
	// (http.DefaultTransport's settings). Its Timeout should be zero: streams last long.
	HTTPClient *http.Client
}

// Option changes the Config of a Client.
type Option func(*Config)

// WithAPIKey sets Config.APIKey.
func WithAPIKey(key string) Option { return func(c *Config) { c.APIKey = key } }

// WithAccessToken sets Config.AccessToken.
func WithAccessToken(token string) Option { return func(c *Config) { c.AccessToken = token } }

// WithDomain sets Config.Domain.
func WithDomain(domain string) Option { return func(c *Config) { c.Domain = domain } }

// WithAPIURL sets Config.APIURL.
func WithAPIURL(url string) Option { return func(c *Config) { c.APIURL = url } }

// WithSandboxURL sets Config.SandboxURL.
func WithSandboxURL(url string) Option { return func(c *Config) { c.SandboxURL = url } }

// WithDebug sets Config.Debug.
func WithDebug(debug bool) Option { return func(c *Config) { c.Debug = debug } }

// WithRequestTimeout sets Config.RequestTimeout (negative: none).
func WithRequestTimeout(d time.Duration) Option { return func(c *Config) { c.RequestTimeout = d } }

// WithRetries sets Config.Retries.
func WithRetries(n int) Option { return func(c *Config) { c.Retries = n } }

// WithHeader adds a header to every control-plane request.
func WithHeader(key, value string) Option {
	return func(c *Config) {
		if c.Headers == nil {
			c.Headers = http.Header{}
		}
		c.Headers.Add(key, value)
	}
}

// WithHTTPClient sets Config.HTTPClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Config) { c.HTTPClient = hc } }

// configFromEnv reads the variables E2B's SDKs read; getenv is os.Getenv outside tests.
func configFromEnv(getenv func(string) string) Config {
	return Config{
		APIKey:       getenv("E2B_API_KEY"),
		AccessToken:  getenv("E2B_ACCESS_TOKEN"),
		Domain:       getenv("E2B_DOMAIN"),
		APIURL:       getenv("E2B_API_URL"),
		SandboxURL:   getenv("E2B_SANDBOX_URL"),
		VolumeAPIURL: getenv("E2B_VOLUME_API_URL"),
		Debug:        strings.EqualFold(getenv("E2B_DEBUG"), "true"),
		Retries:      DefaultRetries,
	}
}

// resolve fills the defaults that depend on other fields.
func (c *Config) resolve() {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.APIURL == "" {
		if c.Debug {
			c.APIURL = "http://localhost:3000"
		} else {
			c.APIURL = "https://api." + c.Domain
		}
	}
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	c.SandboxURL = strings.TrimRight(c.SandboxURL, "/")
	c.VolumeAPIURL = strings.TrimRight(c.VolumeAPIURL, "/")
	if c.VolumeAPIURL == "" {
		c.VolumeAPIURL = c.APIURL
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
}

// sharedSandboxHosts are E2B's own domains, whose sandboxes are reached through one host
// (sandbox.<domain>) routed by headers.
var sharedSandboxHosts = map[string]bool{"e2b.app": true, "e2b.dev": true, "e2b.pro": true, "e2b-staging.dev": true}

// envdURL is the base URL of a sandbox's agent for RPC and file transfers.
func (c *Config) envdURL(sandboxID, domain string) string {
	switch {
	case c.SandboxURL != "":
		return c.SandboxURL
	case c.Debug:
		return "http://localhost:49983"
	case sharedSandboxHosts[domain]:
		return "https://sandbox." + domain
	}
	return "https://" + host(sandboxID, envdPort, domain)
}

// directURL is the URL of one port of a sandbox that works without routing headers, for the
// signed upload and download URLs handed to other programs.
func (c *Config) directURL(sandboxID, domain string, port int) string {
	switch {
	case c.SandboxURL != "":
		return c.SandboxURL
	case c.Debug:
		return "http://" + host("", port, "")
	}
	return "https://" + host(sandboxID, port, domain)
}

func host(sandboxID string, port int, domain string) string {
	if sandboxID == "" {
		return "localhost:" + itoa(port)
	}
	return itoa(port) + "-" + sandboxID + "." + domain
}

// NewClient returns a client configured from the environment (E2B_API_KEY, E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN, E2B_ACCESS_TOKEN, E2B_VOLUME_API_URL, E2B_DEBUG) and then from opts.
func NewClient(opts ...Option) *Client {
	cfg := configFromEnv(os.Getenv)
	for _, o := range opts {
		o(&cfg)
	}
	cfg.resolve()
	return &Client{cfg: cfg}
}
