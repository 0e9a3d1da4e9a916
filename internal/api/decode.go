package api

import (
	"net/http"

	"github.com/warrenhq/warren/internal/httpedge"
)

// maxBody bounds request bodies; the largest legitimate one (env vars and
// metadata) is far smaller. A larger body is refused with 413.
const maxBody = 1 << 20

// bodies reads the API's request bodies. Unknown fields are ignored, as
// E2B does.
var bodies = httpedge.Reader{Limit: maxBody}

// decode reads an optional JSON body into v: an empty body leaves v as
// it is.
func decode(r *http.Request, v any) error { return bodies.Decode(r, v) }

// decodeRequired is decode for endpoints whose body is required; example
// shows the client the smallest body that works.
func decodeRequired(r *http.Request, v any, example string) error {
	return bodies.DecodeRequired(r, v, example)
}
