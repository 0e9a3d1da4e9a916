package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Bench runs the store benchmarks on a store from open:
//
//   - CreateBurst: 100 sandboxes created at once, each with the writes a
//     create makes (the sandbox as creating, a log line, the sandbox as
//     running with its created event and a webhook delivery, a second log
//     line); one op is the whole burst.
//   - SingleWrite: one sandbox's state written at a time, nothing else
//     going on; one op is one write.
func Bench(b *testing.B, open Opener) {
	b.Run("CreateBurst", func(b *testing.B) { benchCreateBurst(b, open(b)) })
	b.Run("SingleWrite", func(b *testing.B) { benchSingleWrite(b, open(b)) })
}

// burst is how many sandboxes a CreateBurst creates at once.
const burst = 100

func benchCreateBurst(b *testing.B, s Store) {
	ctx := b.Context()
	n := 0
	for b.Loop() {
		var wg sync.WaitGroup
		for range burst {
			n++
			id := fmt.Sprintf("i%07d", n)
			wg.Go(func() {
				if err := create(ctx, s, id); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/burst")
	b.ReportMetric(float64(burst*b.N)/b.Elapsed().Seconds(), "creates/s")
	b.ReportMetric(0, "ns/op") // ms/burst says it
}

// create makes a create's writes for sandbox id.
func create(ctx context.Context, s Store, id string) error {
	now := time.Now()
	sb := sandbox.Sandbox{ID: id, TeamID: sandbox.DefaultTeamID, TemplateID: "base", Image: "warren/base",
		State: sandbox.StateCreating, Metadata: map[string]string{"user": "bench"}, StartedAt: now, EndAt: now.Add(5 * time.Minute)}
	if err := s.PutSandbox(ctx, sb); err != nil {
		return err
	}
	if err := s.AppendLog(ctx, sandbox.LogEntry{SandboxID: id, Time: now, Level: "info", Message: "creating"}); err != nil {
		return err
	}
	sb.State = sandbox.StateRunning
	ev := event("e"+id, sandbox.DefaultTeamID, id, now)
	created := sandbox.Recorded{Event: ev, Deliveries: []sandbox.Delivery{delivery("d"+id, "w1", ev, sandbox.DeliveryPending, now)}}
	if err := s.PutSandbox(ctx, sb, created); err != nil {
		return err
	}
	return s.AppendLog(ctx, sandbox.LogEntry{SandboxID: id, Time: now, Level: "info", Message: "running"})
}

func benchSingleWrite(b *testing.B, s Store) {
	ctx := b.Context()
	sb := sandbox.Sandbox{ID: "i1", TeamID: sandbox.DefaultTeamID, State: sandbox.StateRunning, StartedAt: time.Now()}
	for b.Loop() {
		sb.EndAt = time.Now()
		if err := s.PutSandbox(ctx, sb); err != nil {
			b.Fatal(err)
		}
	}
}
