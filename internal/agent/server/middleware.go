package server

import (
	"bufio"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/envdauth"
)

// Headers browsers may read from our responses: Connect's trailers-as-headers
// plus what the REST endpoints set.
const exposedHeaders = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Connect-Content-Encoding, Connect-Accept-Encoding, Location, Cache-Control, X-Content-Type-Options"

// cors allows every origin, as envd does: the SDK runs in browsers too, and
// the access token, not the origin, is what protects the agent.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Origin") == "":
		case envdauth.Preflight(w, r):
			return
		default:
			h := w.Header()
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Expose-Headers", exposedHeaders)
		}
		next.ServeHTTP(w, r)
	})
}

// requireToken enforces the /init access token. /files checks it itself
// because it also accepts signed URLs; /init has its own token rules; the
// tunnel is authenticated by the agent secret instead.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := s.cfg.State.AccessToken()
		if token == "" || tokenExempt(r) || equalSecret(r.Header.Get("X-Access-Token"), token) {
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, http.StatusUnauthorized, envdauth.UnauthorizedMessage)
	})
}

func tokenExempt(r *http.Request) bool {
	switch r.URL.Path {
	case "/health":
		return r.Method == http.MethodGet
	case "/files":
		return r.Method == http.MethodGet || r.Method == http.MethodPost
	case "/init":
		return r.Method == http.MethodPost
	case tunnelPath:
		return true
	}
	return false
}

// equalSecret compares in constant time so the comparison leaks nothing
// about how much of a guess was right.
func equalSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// logRequests logs one line per request when it ends. Health probes and
// metrics reads are logged at debug level: the server polls health while a
// sandbox starts and metrics while it runs, and these lines would bury the
// sandbox's log.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		level := slog.LevelInfo
		if r.URL.Path == "/health" || r.URL.Path == "/metrics" {
			level = slog.LevelDebug
		}
		s.log.Log(r.Context(), level, "request",
			"method", r.Method,
			"path", r.URL.Path,
			"proto", r.Proto,
			"status", rec.status(),
			"bytes", rec.bytes,
			"duration", time.Since(start),
		)
	})
}

// statusRecorder remembers the status and size of a response. It keeps
// streaming and upgrades working: Flush and Hijack reach the real writer,
// and Unwrap lets http.ResponseController find it.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *statusRecorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// markUpgraded records a hijacked connection's status, which the
// ResponseWriter never sees.
func markUpgraded(w http.ResponseWriter) {
	for {
		switch rw := w.(type) {
		case *statusRecorder:
			rw.code = http.StatusSwitchingProtocols
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = rw.Unwrap()
		default:
			return
		}
	}
}

// hasToken reports whether a comma-separated header such as Connection
// lists token, ignoring case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}
