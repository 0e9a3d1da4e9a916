// Package httpedge is where Warren's errors meet HTTP, in both
// directions, for every handler that answers in E2B's shape: the control
// plane (api), the dashboard (web), the volume content service (volume)
// and the node agent (nodeagent). It owns the {code, message} error body,
// the one table between error kinds and statuses (kind → status for an
// answer, status → kind for a client reading one), JSON bodies read with
// a size limit and written, and the lookup from an API key to its team.
//
// It does not own routing, sessions or any handler: those stay with the
// edge that serves them. It imports nothing of Warren's but sandbox, so
// that an engine adapter (the Kubernetes one, through the node agent's
// client) can speak HTTP errors without linking the control plane.
package httpedge

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// statusOf is the one table from error kinds to HTTP statuses; kindOf is
// its inverse.
var statusOf = map[sandbox.Kind]int{
	sandbox.KindInternal:        http.StatusInternalServerError,
	sandbox.KindNotFound:        http.StatusNotFound,
	sandbox.KindConflict:        http.StatusConflict,
	sandbox.KindInvalid:         http.StatusBadRequest,
	sandbox.KindUnauthenticated: http.StatusUnauthorized,
	sandbox.KindForbidden:       http.StatusForbidden,
	sandbox.KindUnavailable:     http.StatusServiceUnavailable,
	sandbox.KindLimited:         http.StatusTooManyRequests,
}

var kindOf = func() map[int]sandbox.Kind {
	m := make(map[int]sandbox.Kind, len(statusOf))
	for k, s := range statusOf {
		m[s] = k
	}
	return m
}()

// Body is E2B's error shape; Code always equals the HTTP status, because
// the SDK branches on it.
type Body struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Status is the HTTP status of err.
func Status(err error) int {
	// A body over the size cap is invalid input, but E2B's clients (and
	// HTTP) have a status of its own for it.
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		return http.StatusRequestEntityTooLarge
	}
	if status, ok := statusOf[sandbox.KindOf(err)]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// KindOf is the error kind of an HTTP status a Warren server answered,
// for its clients: KindInternal for any status the table does not name.
func KindOf(status int) sandbox.Kind {
	if k, ok := kindOf[status]; ok {
		return k
	}
	return sandbox.KindInternal
}

// ErrorOf is the body that answers err: its status and client-safe
// message; internal detail stays out.
func ErrorOf(err error) Body {
	return Body{Code: Status(err), Message: sandbox.Message(err)}
}

// WriteError answers err as ErrorOf says, with a Retry-After header (in
// whole seconds, at least 1) when err says when to retry.
func WriteError(w http.ResponseWriter, err error) {
	if d := sandbox.RetryAfter(err); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(d.Round(time.Second), time.Second)/time.Second)))
	}
	body := ErrorOf(err)
	WriteJSON(w, body.Code, body)
}

// WriteJSON answers v as JSON with status. The status is sent before the
// body, so a failed write means the client left and is not reported.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
