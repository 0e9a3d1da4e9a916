// Package rpctimeout adapts E2B's meaning of Connect-Timeout-Ms to
// connect-go's. The SDK sends "Connect-Timeout-Ms: 0" for streams that must
// not time out (background commands, long watches); connect-go reads 0 as a
// deadline that has already passed. It owns nothing else.
package rpctimeout

import "net/http"

// Unbounded drops a zero Connect-Timeout-Ms header before h sees it, so the
// request runs without a deadline.
func Unbounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Connect-Timeout-Ms") == "0" {
			r.Header.Del("Connect-Timeout-Ms")
		}
		h.ServeHTTP(w, r)
	})
}
