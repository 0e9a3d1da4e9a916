package process

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/proto/process"
)

// BenchmarkStartTrue is one commands.run('true') as the agent sees it,
// without the shell: a Start of /bin/true over HTTP/1.1 with JSON, to its
// end event.
func BenchmarkStartTrue(b *testing.B) {
	h := newHarness(b)
	req := &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true"}}
	for b.Loop() {
		s, err := h.client.Start(context.Background(), connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		for s.Receive() {
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
