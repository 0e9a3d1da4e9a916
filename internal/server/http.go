package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/httpguard"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/volume"
	"github.com/warrenhq/warren/internal/web"
)

// route is the one handler of every client port: requests for a sandbox
// go to the proxy, whatever their path; then volume content, the
// dashboard, and the control-plane API for the rest.
func route(domain string, px, volumes, dashboard, control http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case proxy.IsSandboxRequest(r, domain):
			px.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, volume.ContentPrefix):
			volumes.ServeHTTP(w, r)
		case r.URL.Path == "/dashboard" || strings.HasPrefix(r.URL.Path, web.Prefix):
			dashboard.ServeHTTP(w, r)
		default:
			control.ServeHTTP(w, r)
		}
	})
}

// newHTTPServer returns the server of a client-facing port. Slow headers
// (ReadHeaderTimeout), idle keep-alive connections (IdleTimeout), slow
// bodies and too many connections from one client (guard) are cut; a
// response is never timed, so a process's output, a watch or an upgraded
// connection may stay silent as long as it needs.
func newHTTPServer(cfg Config, guard *httpguard.Guard, h http.Handler, log *slog.Logger) *http.Server {
	srv := &http.Server{
		Handler:           keepAliveHint(cfg.IdleTimeout, h),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	guard.Configure(srv)
	return srv
}

// keepAliveHint tells HTTP/1 clients, in each response's Keep-Alive
// header, how long the server keeps their idle connection (in whole
// seconds, rounded down). A client that reuses an idle connection just as
// the server closes it loses the request it sent (a reset, mid-body for
// an upload) and may not retry it; with the hint, clients that read it
// (undici, behind E2B's JS SDK) stop reusing the connection before that.
func keepAliveHint(idle time.Duration, h http.Handler) http.Handler {
	if idle <= 0 {
		return h
	}
	hint := fmt.Sprintf("timeout=%d", int64(idle/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 1 {
			w.Header().Set("Keep-Alive", hint)
		}
		h.ServeHTTP(w, r)
	})
}
