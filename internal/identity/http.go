package identity

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/warrenhq/warren/internal/logkey"
)

// Paths of the discovery document and the JWKS, from the issuer URL.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/.well-known/jwks.json"
)

// discovery is the part of OpenID Connect Discovery 1.0's provider
// metadata a verifier of these tokens reads; the rest (authorization,
// token endpoints) belongs to interactive login, which this issuer does
// not do.
type discovery struct {
	Issuer          string   `json:"issuer"`
	JWKSURI         string   `json:"jwks_uri"`
	ResponseTypes   []string `json:"response_types_supported"`
	SubjectTypes    []string `json:"subject_types_supported"`
	SigningAlgs     []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported []string `json:"claims_supported"`
	ScopesSupported []string `json:"scopes_supported"`
}

// Register adds GET DiscoveryPath and GET JWKSPath, without
// authentication, to mux. Failures are logged to log (nil = discard).
func (i *Issuer) Register(mux *http.ServeMux, log *slog.Logger) {
	log = logkey.For(log, "identity")
	mux.HandleFunc("GET "+DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
		serveJSON(w, discovery{
			Issuer:          i.cfg.Issuer,
			JWKSURI:         i.cfg.Issuer + JWKSPath,
			ResponseTypes:   []string{"id_token"},
			SubjectTypes:    []string{"public"},
			SigningAlgs:     []string{"ES256"},
			ClaimsSupported: []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "sandbox_id", "team_id"},
			ScopesSupported: []string{"openid"},
		})
	})
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, r *http.Request) {
		set, err := i.JWKS()
		if err != nil {
			log.Error("cannot serve the workload identity keys", "err", err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"code":500,"message":"workload identity keys are unavailable"}`))
			return
		}
		serveJSON(w, set)
	})
}

// serveJSON answers v, cacheable for five minutes: a key is published an
// overlap (a day by default) before it signs, far longer.
func serveJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	json.NewEncoder(w).Encode(v)
}
