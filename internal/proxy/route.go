package proxy

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The headers E2B's SDKs (2.7+) send to route a request on a shared host.
const (
	headerSandboxID   = "E2b-Sandbox-Id"
	headerSandboxPort = "E2b-Sandbox-Port"
)

// destination is where a client wants to go: a port of a sandbox.
type destination struct {
	sandboxID string
	port      int
}

// errBadRoute is a request the proxy cannot route; its text is shown to
// the client.
var errBadRoute = errors.New("missing or invalid E2b-Sandbox-Id and E2b-Sandbox-Port headers")

// IsSandboxRequest reports whether r is for the data plane rather than the
// control plane served on the same port: its host is <port>-<id>.<anything>,
// or it is the shared sandbox.<domain> host, or it is addressed to
// localhost or an IP literal and carries a routing header or is a signed
// /files URL (the control plane has no /files).
func IsSandboxRequest(r *http.Request, domain string) bool {
	host := hostname(r.Host)
	if host == "sandbox."+hostname(domain) {
		return true
	}
	if isLocalHost(host) {
		return r.Header.Get(headerSandboxID) != "" || r.Header.Get(headerSandboxPort) != "" || signedFiles(r)
	}
	_, ok := parseHost(host)
	return ok
}

// route finds the destination of r by E2B's rules: on localhost, an IP
// literal or the shared sandbox.<domain> host, both routing headers are
// required; any other host is <port>-<id>.<domain>.
func route(r *http.Request, domain string) (destination, error) {
	host := hostname(r.Host)
	if isLocalHost(host) || host == "sandbox."+hostname(domain) {
		return routeByHeaders(r.Header)
	}
	if d, ok := parseHost(host); ok {
		return d, nil
	}
	return destination{}, errBadRoute
}

// signedFiles reports whether r is for the agent's /files with a signature
// and no routing header: a URL of the SDK's downloadUrl or uploadUrl made
// with E2B_SANDBOX_URL set, which names its sandbox only in the host it
// would have had (<port>-<id>.<domain>). The signature names it too: the
// sandbox is the one whose access token signed it (Router.Find).
func signedFiles(r *http.Request) bool {
	return r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" &&
		r.Header.Get(headerSandboxID) == "" && r.Header.Get(headerSandboxPort) == ""
}

func routeByHeaders(h http.Header) (destination, error) {
	id, err := sandbox.ParseID(h.Get(headerSandboxID))
	if err != nil {
		return destination{}, errBadRoute
	}
	port, ok := parsePort(h.Get(headerSandboxPort))
	if !ok {
		return destination{}, errBadRoute
	}
	return destination{sandboxID: id, port: port}, nil
}

// parseHost parses a hostname whose leftmost label is <port>-<sandboxID>.
// The label is split on its first "-"; the rest is a sandbox ID, possibly
// E2B's composite <id>-<clientID>. The host needs at least two labels, so
// that "localhost"-like single names never match.
func parseHost(host string) (destination, bool) {
	label, rest, ok := strings.Cut(host, ".")
	if !ok || rest == "" {
		return destination{}, false
	}
	portStr, idStr, ok := strings.Cut(label, "-")
	if !ok {
		return destination{}, false
	}
	port, ok := parsePort(portStr)
	if !ok {
		return destination{}, false
	}
	id, err := sandbox.ParseID(idStr)
	if err != nil {
		return destination{}, false
	}
	return destination{sandboxID: id, port: port}, true
}

// parsePort accepts a decimal TCP port, 1 to 65535.
func parsePort(s string) (int, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return int(n), true
}

// hostname returns the lowercased host of a Host header or domain, without
// port, brackets or trailing dot.
func hostname(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// isLocalHost reports whether host is localhost or an IP literal: hosts on
// which clients route by header.
func isLocalHost(host string) bool {
	if host == "localhost" || host == "" {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}
