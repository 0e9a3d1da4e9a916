package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/warrenhq/warren/internal/sandbox"
)

// statusOf is the one table from error kinds to HTTP statuses.
var statusOf = map[sandbox.Kind]int{
	sandbox.KindInternal:        http.StatusInternalServerError,
	sandbox.KindNotFound:        http.StatusNotFound,
	sandbox.KindConflict:        http.StatusConflict,
	sandbox.KindInvalid:         http.StatusBadRequest,
	sandbox.KindUnauthenticated: http.StatusUnauthorized,
	sandbox.KindForbidden:       http.StatusForbidden,
	sandbox.KindUnavailable:     http.StatusServiceUnavailable,
}

// errorBody is E2B's error shape; Code always equals the HTTP status,
// because the SDK branches on it.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Status is the HTTP status of err, for every handler that answers in
// E2B's {code, message} shape (the dashboard's too).
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

func errorOf(err error) errorBody {
	status := Status(err)
	return errorBody{Code: status, Message: sandbox.Message(err)}
}

func writeError(w http.ResponseWriter, err error) {
	body := errorOf(err)
	writeJSON(w, body.Code, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
