package files

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/envdauth"
)

// Operations a signature grants.
const (
	OperationRead  = envdauth.OperationRead
	OperationWrite = envdauth.OperationWrite
)

// authorize lets a request through by envd's rules for /files: no token
// set, the token, or a URL signed for op and unexpired. A refusal is a 401
// saying why.
func authorize(r *http.Request, op, token string) error {
	if err := envdauth.CheckFiles(r, op, token, time.Now()); err != nil {
		return errorf(http.StatusUnauthorized, "%s", err)
	}
	return nil
}
