// Package jupyter speaks the client side of the Jupyter messaging protocol
// (version 5.3) to one kernel over ZeroMQ: the connection file, the wire
// format with its HMAC-SHA256 signatures, and the shell and iopub channels
// an execution needs. It does not start or supervise kernel processes, and
// it knows nothing of E2B's protocol; package codeinterp does both.
package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ProtocolVersion is the messaging protocol version we put in headers.
const ProtocolVersion = "5.3"

// delimiter separates ZeroMQ routing identities from the signed message.
var delimiter = []byte("<IDS|MSG>")

// Header is a message header. The zero Header marshals to "{}", which is
// what a message without a parent carries as its parent_header.
type Header struct {
	MsgID    string `json:"msg_id,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Version  string `json:"version,omitempty"`
}

// Message is one protocol message, decoded as far as routing needs; the
// content stays raw for the receiver to decode by MsgType.
type Message struct {
	Identities [][]byte
	Header     Header
	Parent     Header
	Metadata   json.RawMessage // nil marshals as {}
	Content    json.RawMessage // nil marshals as {}
	Buffers    [][]byte
}

// NewMessage returns a message of the given type and content for a session.
func NewMessage(session, msgType string, content any) (*Message, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode %s content: %w", msgType, err)
	}
	return &Message{
		Header: Header{
			MsgID:    NewID(),
			Session:  session,
			Username: "warren",
			Date:     time.Now().UTC().Format(time.RFC3339Nano),
			MsgType:  msgType,
			Version:  ProtocolVersion,
		},
		Content: raw,
	}, nil
}

// NewID returns a random UUID (version 4) string; the protocol uses them
// for message and session ids.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Frames encodes the message for the wire, signed with key (an empty key
// disables signing, as the protocol allows).
func (m *Message) Frames(key []byte) ([][]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	parent, err := json.Marshal(m.Parent)
	if err != nil {
		return nil, err
	}
	parts := [4][]byte{header, parent, orEmptyObject(m.Metadata), orEmptyObject(m.Content)}
	frames := make([][]byte, 0, len(m.Identities)+6+len(m.Buffers))
	frames = append(frames, m.Identities...)
	frames = append(frames, delimiter, sign(key, parts[:]))
	frames = append(frames, parts[:]...)
	return append(frames, m.Buffers...), nil
}

// Parse decodes frames received from a kernel and checks their signature.
func Parse(frames [][]byte, key []byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if i == len(frames) {
		return nil, errors.New("jupyter: message without delimiter")
	}
	if len(frames) < i+6 {
		return nil, fmt.Errorf("jupyter: message has %d frames after the delimiter, want at least 5", len(frames)-i-1)
	}
	sig, parts := frames[i+1], frames[i+2:i+6]
	if len(key) > 0 && !hmac.Equal(sig, sign(key, parts)) {
		return nil, errors.New("jupyter: bad message signature")
	}
	m := &Message{
		Identities: frames[:i],
		Metadata:   json.RawMessage(parts[2]),
		Content:    json.RawMessage(parts[3]),
		Buffers:    frames[i+6:],
	}
	if err := json.Unmarshal(parts[0], &m.Header); err != nil {
		return nil, fmt.Errorf("jupyter: decode header: %w", err)
	}
	if err := json.Unmarshal(parts[1], &m.Parent); err != nil {
		return nil, fmt.Errorf("jupyter: decode parent header: %w", err)
	}
	return m, nil
}

// sign returns the hex HMAC-SHA256 of the four signed parts, or an empty
// signature when there is no key.
func sign(key []byte, parts [][]byte) []byte {
	if len(key) == 0 {
		return []byte{}
	}
	mac := hmac.New(sha256.New, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return []byte(hex.EncodeToString(mac.Sum(nil)))
}

func orEmptyObject(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	return raw
}
