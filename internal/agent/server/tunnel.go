package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The tunnel's wire contract, shared with internal/agentclient (which
// states it again rather than import the agent; its tests hold the two
// together).
const (
	tunnelPath     = "/_warren/tunnel"
	tunnelProtocol = "warren-tunnel"
	secretHeader   = "X-Warren-Agent-Secret"
)

// tunnelDialTimeout bounds each local dial; a port inside the sandbox
// either accepts or refuses at once, so this only guards a full backlog.
const tunnelDialTimeout = 2 * time.Second

// tunnel upgrades the connection to a raw byte pipe to a port inside the
// sandbox. It is how the Warren server reaches every port but the agent's:
// the agent dials from inside the sandbox's network namespace, so servers
// bound to 127.0.0.1 are reachable too.
func (s *Server) tunnel(w http.ResponseWriter, r *http.Request) {
	secret := s.serverSecret()
	if secret == "" {
		writeError(w, http.StatusForbidden, "the tunnel is disabled")
		return
	}
	if !equalSecret(r.Header.Get(secretHeader), secret) {
		writeError(w, http.StatusUnauthorized, "invalid agent secret")
		return
	}
	// Hijacking needs HTTP/1.1; HTTP/2 forbids Connection headers anyway.
	if r.ProtoMajor != 1 || !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", tunnelProtocol) {
		writeError(w, http.StatusBadRequest, "expected an HTTP/1.1 upgrade to "+tunnelProtocol)
		return
	}
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "invalid port")
		return
	}
	target, err := dialLocal(r.Context(), port)
	if err != nil {
		s.log.Debug("tunnel dial failed", "port", port, "err", err)
		writeError(w, http.StatusBadGateway, fmt.Sprintf("port %d is not open", port))
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		target.Close()
		s.log.Error("tunnel hijack failed", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot upgrade this connection")
		return
	}
	markUpgraded(w)
	if !s.track(client, target) {
		client.Close()
		target.Close()
		return
	}
	// The server may have set deadlines for reading the request; a tunnel
	// lives as long as its two ends want.
	_ = client.SetDeadline(time.Time{})
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + tunnelProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		s.untrack(client, target)
		return
	}
	s.log.Debug("tunnel open", "port", port)
	// brw.Reader holds whatever the client sent after its request, so the
	// client-to-target copy reads through it.
	s.wg.Go(func() {
		defer s.untrack(client, target)
		pipe(client, brw.Reader, target)
		s.log.Debug("tunnel closed", "port", port)
	})
}

// track registers a tunnel's connections so Close can cut them; it refuses
// once Close has begun.
func (s *Server) track(conns ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	for _, c := range conns {
		s.tunnels[c] = struct{}{}
	}
	return true
}

func (s *Server) untrack(conns ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(s.tunnels, c)
	}
}

// dialLocal connects to port on the sandbox's loopback, IPv4 first: most
// servers listen there or on a wildcard address that includes it.
func dialLocal(ctx context.Context, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: tunnelDialTimeout}
	var errs []error
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// pipe copies both ways until both directions end. An end of stream in one
// direction is passed on as a half close, so request/response protocols
// that shut down their writing side still get their answer; an error in
// either direction tears both down.
func pipe(client net.Conn, fromClient io.Reader, target net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() { copyHalf(target, fromClient, client, target) })
	copyHalf(client, target, client, target)
	wg.Wait()
}

func copyHalf(dst io.Writer, src io.Reader, a, b net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		a.Close()
		b.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	a.Close()
	b.Close()
}
