package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Sealed values are sealFormat, a 12-byte nonce and the AES-256-GCM
// ciphertext. The additional data binds each to its team, secret and
// version, so that a sealed value copied to another row does not open.
const sealFormat = 1

// keySize is AES-256's.
const keySize = 32

// sealer seals and opens secret values with the server's key.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func additionalData(team, id string, version int64) []byte {
	return []byte("warren-secret\x00" + team + "\x00" + id + "\x00" + strconv.FormatInt(version, 10))
}

func (s *sealer) seal(team, id string, version int64, value string) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(value)+s.aead.Overhead())
	out[0] = sealFormat
	rand.Read(out[1:])
	return s.aead.Seal(out, out[1:], []byte(value), additionalData(team, id, version))
}

var errUnsealable = errors.New("the value cannot be decrypted with this server's secrets key (was --secrets-key-file changed?)")

func (s *sealer) open(team, id string, version int64, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != sealFormat {
		return "", errUnsealable
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], additionalData(team, id, version))
	if err != nil {
		return "", errUnsealable
	}
	return string(plain), nil
}

// loadKey reads the key file: 64 hexadecimal digits (a trailing newline
// is fine), as `openssl rand -hex 32` writes them. A missing file is made
// when create is set; a file that holds anything else is an error, never
// replaced, as that would lose every secret sealed with it.
func loadKey(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		return makeKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(key) != keySize {
		return nil, fmt.Errorf("secrets key %s: want %d hexadecimal digits (make one with: openssl rand -hex %d)", path, 2*keySize, keySize)
	}
	return key, nil
}

func makeKey(path string) ([]byte, error) {
	key := make([]byte, keySize)
	rand.Read(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	// O_EXCL: of two servers starting on one state dir, one key wins and
	// the other reads it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return loadKey(path, false)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return key, nil
}
