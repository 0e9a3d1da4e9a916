package web

import (
	"context"
	"io"
	"net"
	"net/http"

	"golang.org/x/net/websocket"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Screens shows desktop sandboxes' screens: it runs the command that
// starts a VNC server on the sandbox's display and opens byte streams to
// it through the agent's tunnel; *agentclient.Client implements it.
type Screens interface {
	RunCommand(ctx context.Context, addr, accessToken, user, workdir, cmd string, env map[string]string) (int, string, error)
	DialTunnel(ctx context.Context, addr, secret string, port int) (net.Conn, error)
}

// screenPort is the dashboard's own VNC server in a desktop sandbox: not
// the SDK's stream (5900), which may have a password or be stopped.
const screenPort = 5901

// screenCmd starts the dashboard's VNC server on display :0 unless it
// runs: x11vnc on the sandbox's loopback only (the agent's tunnel reaches
// it there), shared with other viewers, with no password of its own (the
// dashboard's session is the authentication, and a sandbox's processes
// could drive its display anyway). It exits 3 in a sandbox without
// x11vnc and 4 while nothing serves the display. x11vnc -bg returns once
// it listens. The desktop image links x11vnc as warren-screen, so that
// the SDK's stream, which checks for and kills processes named x11vnc,
// neither sees nor stops this one.
const screenCmd = `vnc=/usr/local/lib/warren/warren-screen
[ -x "$vnc" ] || vnc=$(command -v x11vnc) || exit 3
xdpyinfo -display :0 >/dev/null 2>&1 || exit 4
netstat -tln | grep -q ':5901 ' && exit 0
"$vnc" -display :0 -rfbport 5901 -localhost -shared -forever -nopw -bg -quiet -o /tmp/.warren-dashboard-x11vnc.log >/dev/null 2>&1`

// screen relays the RFB stream of a running desktop sandbox's display
// over a WebSocket, for the noVNC client of the sandbox view (view only
// until the user takes control there). Its handshake is checked like the
// terminal's.
func (s *server) screen(w http.ResponseWriter, r *http.Request, team string) error {
	if s.cfg.Screens == nil {
		return sandbox.Errorf(sandbox.KindUnavailable, "this server shows no screens")
	}
	sb, err := s.socketSandbox(r, team, "the screen")
	if err != nil {
		return err
	}
	code, _, err := s.cfg.Screens.RunCommand(r.Context(), sb.AgentAddr, sb.EnvdAccessToken, terminalUser, "", screenCmd, nil)
	switch {
	case err != nil:
		return err
	case code == 3:
		return sandbox.Errorf(sandbox.KindConflict, "sandbox %s has no desktop (no x11vnc): start it from the desktop template", sb.ID)
	case code == 4:
		return sandbox.Errorf(sandbox.KindConflict, "sandbox %s has no display :0 yet", sb.ID)
	case code != 0:
		return sandbox.Errorf(sandbox.KindUnavailable, "the VNC server of sandbox %s did not start (exit %d)", sb.ID, code)
	}
	vnc, err := s.cfg.Screens.DialTunnel(r.Context(), sb.AgentAddr, sb.AgentSecret, screenPort)
	if err != nil {
		return sandbox.Wrap(sandbox.KindUnavailable, err, "cannot reach the sandbox's VNC server")
	}
	defer vnc.Close()
	// The Origin was checked by socketSandbox, against the request's own host.
	ws := websocket.Server{Handshake: func(*websocket.Config, *http.Request) error { return nil }, Handler: func(c *websocket.Conn) {
		c.PayloadType = websocket.BinaryFrame
		done := make(chan struct{})
		go func() {
			defer close(done)
			io.Copy(c, vnc)
		}()
		io.Copy(vnc, c)
		vnc.Close()
		<-done
		c.Close()
	}}
	ws.ServeHTTP(w, r)
	return nil
}
