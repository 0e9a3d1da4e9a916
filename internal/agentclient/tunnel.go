package agentclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The tunnel's wire contract, as the agent (internal/agent/server) serves
// it. It is stated on both sides so the server does not link the agent;
// the tests here run against the real agent server.
const (
	tunnelPath     = "/_warren/tunnel"
	tunnelProtocol = "warren-tunnel"
	secretHeader   = "X-Warren-Agent-Secret"
)

// ErrPortClosed means nothing inside the sandbox accepts connections on
// the port asked for. Errors from DialTunnel match it with errors.Is.
var ErrPortClosed = errors.New("port is not open in the sandbox")

// DialTunnel opens a byte stream to port inside the sandbox whose agent
// listens at addr, authenticated by the sandbox's agent secret. ctx bounds
// the dial and the upgrade, not the returned connection. The connection
// supports CloseWrite, so callers can pass on a half close.
func (c *Client) DialTunnel(ctx context.Context, addr, secret string, port int) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "agent is not reachable")
	}
	// Cancelling ctx mid-handshake must unblock the reads and writes below.
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	tc, err := handshake(conn, addr, secret, port)
	interrupted := !stop()
	if interrupted || err != nil {
		conn.Close()
		if interrupted {
			err = sandbox.Wrap(sandbox.KindUnavailable, ctx.Err(), "tunnel handshake interrupted")
		}
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return tc, nil
}

func handshake(conn net.Conn, addr, secret string, port int) (net.Conn, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+tunnelPath+"?port="+strconv.Itoa(port), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", tunnelProtocol)
	req.Header.Set(secretHeader, secret)
	if err := req.Write(conn); err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "tunnel request failed")
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.KindUnavailable, err, "tunnel response unreadable")
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The target may speak first (SSH, SMTP…); its first bytes can
		// already sit in br.
		return &tunnelConn{Conn: conn, r: br}, nil
	}
	defer resp.Body.Close()
	cause := responseError(resp)
	switch resp.StatusCode {
	case http.StatusBadGateway:
		return nil, &sandbox.Error{Kind: sandbox.KindUnavailable, Message: fmt.Sprintf("port %d is not open", port), Err: fmt.Errorf("%w: %w", ErrPortClosed, cause)}
	case http.StatusBadRequest:
		return nil, sandbox.Wrap(sandbox.KindInvalid, cause, "invalid tunnel request")
	default:
		// 401/403: the server and the agent disagree on the secret, which
		// is Warren's fault, not the client's.
		return nil, sandbox.Wrap(sandbox.KindInternal, cause, "tunnel refused by the agent")
	}
}

// tunnelConn is the upgraded connection, read through the buffer that
// parsed the 101 response.
type tunnelConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *tunnelConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes the connection: the agent passes it on to the
// target as end of input.
func (c *tunnelConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
