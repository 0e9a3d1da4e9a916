package web

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/net/websocket"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Terminals opens shells on pseudo-terminals in sandboxes;
// *agentclient.Client implements it.
type Terminals interface {
	OpenPTY(ctx context.Context, addr, accessToken, user string, cols, rows uint32) (*agentclient.PTY, error)
}

// terminalUser is who the terminal's shell runs as: the SDK's default
// user.
const terminalUser = "user"

// termMessage is what the browser sends over the terminal's WebSocket:
// keys typed ("input") or a new size ("resize"). The server sends the
// terminal's output as binary messages.
type termMessage struct {
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
	Cols uint32 `json:"cols,omitempty"`
	Rows uint32 `json:"rows,omitempty"`
}

func (s *server) agentRoutes(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/sandboxes/{id}/terminal", s.authed(s.terminal))
	mux.Handle("GET /dashboard/api/sandboxes/{id}/screen", s.authed(s.screen))
}

// socketSandbox returns the running sandbox of team a WebSocket to what
// (the terminal, the screen) asks for. A WebSocket handshake is a GET
// that browsers send across sites with cookies of Lax sessions, so
// besides the SameSite=Strict cookie it needs the session's CSRF token
// (in the csrf query parameter, as browsers cannot set headers on it) and
// an Origin of this host.
func (s *server) socketSandbox(r *http.Request, team, what string) (sandbox.Sandbox, error) {
	ds, err := s.session(r)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	r.Header.Set(CSRFHeader, r.URL.Query().Get("csrf"))
	if err := checkCSRF(r, ds); err != nil {
		return sandbox.Sandbox{}, err
	}
	if o, err := url.Parse(r.Header.Get("Origin")); err != nil || o.Host != r.Host {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindForbidden, "%s opens only from this server's own pages", what)
	}
	sb, err := s.teamSandbox(r, team)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Sandbox{}, sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s; resume it to open %s", sb.ID, sb.State, what)
	}
	return sb, nil
}

// terminal relays a login shell on a PTY in a running sandbox over a
// WebSocket (socketSandbox checks its handshake).
func (s *server) terminal(w http.ResponseWriter, r *http.Request, team string) error {
	if s.cfg.Terminals == nil {
		return sandbox.Errorf(sandbox.KindUnavailable, "this server has no terminals")
	}
	sb, err := s.socketSandbox(r, team, "the terminal")
	if err != nil {
		return err
	}
	cols, rows := uint32(100), uint32(30)
	pty, err := s.cfg.Terminals.OpenPTY(r.Context(), sb.AgentAddr, sb.EnvdAccessToken, terminalUser, cols, rows)
	if err != nil {
		return err
	}
	defer pty.Close()
	// The Origin was checked above, against the request's own host.
	ws := websocket.Server{Handshake: func(*websocket.Config, *http.Request) error { return nil }, Handler: func(c *websocket.Conn) {
		c.PayloadType = websocket.BinaryFrame
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(c, pty)
		}()
		go func() {
			for {
				var m termMessage
				if err := websocket.JSON.Receive(c, &m); err != nil {
					pty.Close()
					return
				}
				switch m.Type {
				case "input":
					if _, err := pty.Write([]byte(m.Data)); err != nil {
						s.log.Debug("terminal input", logkey.Sandbox, sb.ID, "err", err)
					}
				case "resize":
					if m.Cols > 0 && m.Rows > 0 && m.Cols <= 1000 && m.Rows <= 1000 {
						pty.Resize(m.Cols, m.Rows)
					}
				}
			}
		}()
		<-done
		c.Close()
	}}
	ws.ServeHTTP(w, r)
	return nil
}
