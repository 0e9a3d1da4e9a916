package jupyter

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSignKnownVector(t *testing.T) {
	// HMAC-SHA256 of "headerparentmetadatacontent" under key "key",
	// computed independently with Python's hmac module.
	got := sign([]byte("key"), [][]byte{[]byte("header"), []byte("parent"), []byte("metadata"), []byte("content")})
	const want = "d83c5c76c2e1f6da0587e480646b0a65ad9427e3e5fffbfb46d761b101960335"
	if string(got) != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if got := sign(nil, nil); len(got) != 0 {
		t.Fatalf("no key must mean an empty signature, got %q", got)
	}
}

func TestFramesRoundTrip(t *testing.T) {
	key := []byte("secret")
	m, err := NewMessage("session-1", "execute_request", map[string]any{"code": "1+1"})
	if err != nil {
		t.Fatal(err)
	}
	m.Identities = [][]byte{[]byte("peer")}
	m.Parent = Header{MsgID: "parent-id"}
	m.Buffers = [][]byte{{0, 1, 2}}
	m.Metadata = json.RawMessage(`{"k":1}`)
	frames, err := m.Frames(key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frames[1], delimiter) || len(frames) != 8 {
		t.Fatalf("frames %q", frames)
	}
	got, err := Parse(frames, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	m.Metadata = nil
	if frames, _ := m.Frames(key); string(frames[5]) != "{}" {
		t.Errorf("nil metadata encoded as %q, want {}", frames[5])
	}
}

func TestParseRejects(t *testing.T) {
	key := []byte("secret")
	m, _ := NewMessage("s", "status", map[string]string{"execution_state": "idle"})
	frames, _ := m.Frames(key)
	tampered := append([][]byte(nil), frames...)
	tampered[5] = []byte(`{"execution_state":"busy"}`)
	tests := []struct {
		name   string
		frames [][]byte
		key    []byte
	}{
		{"tampered content", tampered, key},
		{"wrong key", frames, []byte("other")},
		{"no delimiter", frames[1:], key},
		{"truncated", frames[:4], key},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(tt.frames, tt.key); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := Parse(tampered, nil); err != nil {
		t.Errorf("without a key signatures are not checked, got %v", err)
	}
}
