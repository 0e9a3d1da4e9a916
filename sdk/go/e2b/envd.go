package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/sdk/go/internal/envd/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/sdk/go/internal/envd/process/processconnect"
)

// Versions of the agent (envd) from which it behaves as the SDK expects.
const (
	envdDefaultUser      = "0.4.0" // before: the user "user" must be named on every call
	envdCloseStdin       = "0.5.2"
	envdOctetStream      = "0.5.7"
	envdFileMetadata     = "0.6.2"
	envdDebugVersion     = "99.99.99"
	keepalivePingSeconds = "50"
	healthCheckTimeout   = 5 * time.Second
)

// envdConn is the connection to one sandbox's agent: its Connect RPC clients and its REST
// endpoints (/files, /health), with the headers every request carries.
type envdConn struct {
	cfg       *Config
	sandboxID string
	baseURL   string
	version   string
	token     string // the envd access token, "" when the sandbox has none
	http      *http.Client
	process   processconnect.ProcessClient
	fs        filesystemconnect.FilesystemClient
}

func newEnvdConn(cfg *Config, sandboxID, domain, version, token string) *envdConn {
	e := &envdConn{
		cfg:       cfg,
		sandboxID: sandboxID,
		baseURL:   cfg.envdURL(sandboxID, domain),
		version:   version,
		token:     token,
		http:      cfg.HTTPClient,
	}
	hc := envdHTTP{e}
	e.process = processconnect.NewProcessClient(hc, e.baseURL)
	e.fs = filesystemconnect.NewFilesystemClient(hc, e.baseURL)
	return e
}

// envdHTTP puts the sandbox's routing and access headers on every request to its agent.
type envdHTTP struct{ e *envdConn }

func (h envdHTTP) Do(r *http.Request) (*http.Response, error) {
	h.e.setHeaders(r.Header)
	return h.e.http.Do(r)
}

func (e *envdConn) setHeaders(h http.Header) {
	h.Set("User-Agent", userAgent)
	h.Set("E2b-Sandbox-Id", e.sandboxID)
	h.Set("E2b-Sandbox-Port", strconv.Itoa(envdPort))
	if e.token != "" {
		h.Set("X-Access-Token", e.token)
	}
}

// user is the user to name on a request: the one asked for, or "user" for old agents that
// have no default of their own.
func (e *envdConn) user(asked string) string {
	if asked == "" && versionBefore(e.version, envdDefaultUser) {
		return "user"
	}
	return asked
}

// setUser names the user of an RPC in the Basic authorization header, as envd expects.
func (e *envdConn) setUser(h http.Header, asked string) {
	if u := e.user(asked); u != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u+":")))
	}
}

// health probes the agent: true when it answers, false when the proxy says the sandbox is
// not running (502), an error when neither can be told.
func (e *envdConn) health(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.baseURL+"/health", nil)
	if err != nil {
		return false, err
	}
	e.setHeaders(req.Header)
	res, err := e.http.Do(req)
	if err != nil {
		return false, transportError(ctx, err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	switch {
	case res.StatusCode == http.StatusBadGateway:
		return false, nil
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return true, nil
	}
	return false, &SandboxError{Message: fmt.Sprintf("health check: %d %s", res.StatusCode, http.StatusText(res.StatusCode)), StatusCode: res.StatusCode}
}

const sandboxGoneMessage = "The sandbox was killed or reached its end of life while the request was in progress"

func sandboxTimeoutError(msg string, cause error) error {
	return &TimeoutError{sandboxErr(0, msg+": This error is likely due to sandbox timeout. You can modify the sandbox timeout by passing a timeout when creating the sandbox or calling SetTimeout on the sandbox.", cause)}
}

// rpcError maps an error of an RPC to the SDK's classes as the official SDKs do. A stream cut
// off is told apart from a sandbox that went away by asking /health, which answers 502 for a
// sandbox that is not running.
// notFound builds the error for the "not_found" code.
func (e *envdConn) rpcError(err error, notFound func(string, error) error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return &SandboxError{Message: err.Error(), Err: err}
	}
	msg := ce.Message()
	if ce.Code() == connect.CodeUnknown || connectionBroke(err) {
		// A stream cut off: Connect reports it as "unknown", or as a broken envelope when
		// the connection closed mid-message.
		if running, herr := e.health(context.Background()); herr == nil && !running {
			return &TimeoutError{sandboxErr(0, sandboxGoneMessage, err)}
		}
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		return &InvalidArgumentError{sandboxErr(0, msg, err)}
	case connect.CodeUnauthenticated:
		return &AuthenticationError{Message: msg, Err: err}
	case connect.CodeNotFound:
		if notFound != nil {
			return notFound(msg, err)
		}
		return &NotFoundError{sandboxErr(0, msg, err)}
	case connect.CodeResourceExhausted:
		return &RateLimitError{sandboxErr(0, msg+": The requests are being rate limited.", err)}
	case connect.CodeUnavailable:
		return sandboxTimeoutError(msg, err)
	case connect.CodeCanceled:
		return &TimeoutError{sandboxErr(0, msg+": This error is likely due to exceeding the request timeout or the context being cancelled.", err)}
	case connect.CodeDeadlineExceeded:
		return &TimeoutError{sandboxErr(0, msg+": This error is likely due to exceeding the command's or the request's timeout.", err)}
	}
	return &SandboxError{Message: ce.Code().String() + ": " + msg, Err: err}
}

func fileNotFound(msg string, err error) error {
	return &FileNotFoundError{NotFoundError{sandboxErr(http.StatusNotFound, msg, err)}}
}

// restError maps a failed response of the agent's REST endpoints.
func restError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	msg := (&apiResponse{status: res.StatusCode, body: b}).message()
	code := res.StatusCode
	switch code {
	case http.StatusBadRequest:
		return &InvalidArgumentError{sandboxErr(code, msg, nil)}
	case http.StatusUnauthorized:
		return &AuthenticationError{Message: msg}
	case http.StatusNotFound:
		return fileNotFound(msg, nil)
	case http.StatusTooManyRequests:
		return &RateLimitError{sandboxErr(code, msg+": The requests are being rate limited.", nil)}
	case http.StatusBadGateway:
		return sandboxTimeoutError(msg, nil)
	case http.StatusInsufficientStorage:
		return &NotEnoughSpaceError{sandboxErr(code, msg, nil)}
	}
	return &SandboxError{Message: fmt.Sprintf("%d: %s", code, msg), StatusCode: code}
}

// versionBefore says whether the semantic version v is lower than min; a version that does
// not parse counts as current.
func versionBefore(v, min string) bool {
	a, ok := parseVersion(v)
	if !ok {
		return false
	}
	b, _ := parseVersion(min)
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
