package identity

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/warrenhq/warren/internal/secretfile"
)

// signingKey is one ES256 key of the issuer.
type signingKey struct {
	id      string // the kid: the key's JWK thumbprint (RFC 7638)
	created time.Time
	priv    *ecdsa.PrivateKey
	signer  jose.Signer
}

func (k signingKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.id, Algorithm: string(jose.ES256), Use: "sig"}
}

// storedKey is a key as the key file keeps it.
type storedKey struct {
	Created time.Time `json:"created"`
	PKCS8   string    `json:"pkcs8"` // base64 of the private key's PKCS #8 DER
}

func newKey(priv *ecdsa.PrivateKey, created time.Time) (signingKey, error) {
	tp, err := (&jose.JSONWebKey{Key: &priv.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return signingKey{}, err
	}
	id := base64.RawURLEncoding.EncodeToString(tp)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: id}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return signingKey{}, err
	}
	return signingKey{id: id, created: created, priv: priv, signer: signer}, nil
}

func generateKey(now time.Time) (signingKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return signingKey{}, err
	}
	return newKey(priv, now)
}

// loadKeys reads the key file; a missing one is no keys.
func loadKeys(path string) ([]signingKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workload identity keys: %w", err)
	}
	return decodeKeys(path, b)
}

// decodeKeys reads keys in the key file's form; from names where they
// come from, for errors.
func decodeKeys(from string, b []byte) ([]signingKey, error) {
	var stored []storedKey
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, fmt.Errorf("workload identity keys %s: %w (remove the file to start with a new key; tokens already issued stop verifying)", from, err)
	}
	var keys []signingKey
	for _, s := range stored {
		der, err := base64.StdEncoding.DecodeString(s.PKCS8)
		if err != nil {
			return nil, fmt.Errorf("workload identity keys %s: %w", from, err)
		}
		p, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, fmt.Errorf("workload identity keys %s: %w", from, err)
		}
		priv, ok := p.(*ecdsa.PrivateKey)
		if !ok || priv.Curve != elliptic.P256() {
			return nil, fmt.Errorf("workload identity keys %s: a key is not ECDSA P-256", from)
		}
		k, err := newKey(priv, s.Created)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// saveKeys writes the key file whole, through a new file renamed over
// the old, so that a crash leaves one or the other.
func saveKeys(path string, keys []signingKey) error {
	b, err := encodeKeys(keys)
	if err != nil {
		return err
	}
	return secretfile.Write(path, b)
}

// encodeKeys is keys in the key file's form.
func encodeKeys(keys []signingKey) ([]byte, error) {
	stored := make([]storedKey, 0, len(keys))
	for _, k := range keys {
		der, err := x509.MarshalPKCS8PrivateKey(k.priv)
		if err != nil {
			return nil, err
		}
		stored = append(stored, storedKey{Created: k.created.UTC(), PKCS8: base64.StdEncoding.EncodeToString(der)})
	}
	return json.MarshalIndent(stored, "", "  ")
}

// rotate brings the keys up to date and returns the one that signs now.
// The newest key older than the overlap signs (on a first start, with
// only younger keys, the oldest). A key is made when the newest is due
// to sign no longer than the overlap from now, so it is published for the
// overlap before it signs; a key that stopped signing is dropped an
// overlap after, when no token it signed can be alive. The caller holds
// i.mu.
func (i *Issuer) rotate() (signingKey, error) {
	now := i.cfg.Now()
	keys, changed := i.keys, false
	if len(keys) == 0 || now.Sub(keys[len(keys)-1].created) >= i.cfg.RotateEvery-i.cfg.Overlap {
		k, err := generateKey(now)
		if err != nil {
			return signingKey{}, err
		}
		keys, changed = append(keys[:len(keys):len(keys)], k), true
	}
	signer := 0
	for j, k := range keys {
		if now.Sub(k.created) >= i.cfg.Overlap {
			signer = j
		}
	}
	// Key j stopped signing when key j+1 began to, an overlap after
	// j+1 was made.
	drop := 0
	for drop < signer && now.Sub(keys[drop+1].created) >= 2*i.cfg.Overlap {
		drop++
	}
	if drop > 0 {
		keys, signer, changed = keys[drop:], signer-drop, true
	}
	if changed {
		theirs, err := i.share(keys)
		if err != nil {
			return signingKey{}, err
		}
		if theirs != nil {
			// Another replica changed the shared keys first: its keys
			// are the ones, brought up to date in turn.
			if err := saveKeys(i.cfg.KeyFile, theirs); err != nil {
				return signingKey{}, fmt.Errorf("save workload identity keys: %w", err)
			}
			i.keys = theirs
			return i.rotateShared()
		}
		// Only a saved change counts: a key that signed must survive a
		// restart.
		if err := saveKeys(i.cfg.KeyFile, keys); err != nil {
			return signingKey{}, fmt.Errorf("save workload identity keys: %w", err)
		}
		i.keys = keys
	}
	return keys[signer], nil
}

// rotateShared is rotate after taking another replica's keys: once more,
// and no more (theirs are as new as the clock says, unless clocks differ
// by more than the overlap).
func (i *Issuer) rotateShared() (signingKey, error) {
	shared := i.cfg.Shared
	i.cfg.Shared = nil
	defer func() { i.cfg.Shared = shared }()
	return i.rotate()
}

// share swaps a change of the keys into Config.Shared, and returns the
// keys another replica changed them to first (nil: the change is kept).
func (i *Issuer) share(keys []signingKey) ([]signingKey, error) {
	if i.cfg.Shared == nil {
		return nil, nil
	}
	b, err := encodeKeys(keys)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kept, err := i.cfg.Shared.SwapKeys(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("share workload identity keys: %w", err)
	}
	if bytes.Equal(kept, b) {
		return nil, nil
	}
	return decodeKeys("(shared)", kept)
}
