package warmpool

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The pool of code-interpreter sandboxes: the same mechanism as the base
// template's, with the image and agent arguments of code-interpreter-v1,
// whose image is optional.

// recorder is a slog.Handler that keeps the records it is given.
type recorder struct {
	mu   sync.Mutex // guards recs
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// above returns the messages of records at level or above.
func (r *recorder) above(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level >= level {
			out = append(out, rec.Message)
		}
	}
	return out
}

// A pool whose code-interpreter image is not built keeps no such
// container and says nothing above debug about it, without backing off
// the base pool; once the image is built, the pool fills.
func TestPoolCodeInterpreterImageMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &recorder{}
		e := newEnv(t, settings(1, 1), func(d *Deps) { d.Logger = slog.New(log) })
		synctest.Wait()
		if base, ci := len(e.pooledOf(nil)), len(e.pooledOf(ciArgs)); base != 1 || ci != 0 {
			t.Fatalf("pool: %d base, %d code-interpreter; want 1 and 0", base, ci)
		}
		// Base claims refill at once, with no backoff.
		for range 3 {
			if id := e.create(t, "base"); id == "" {
				t.Fatal("a base create found nothing to claim")
			}
			synctest.Wait()
			if got := len(e.pooledOf(nil)); got != 1 {
				t.Fatalf("base pool after a claim = %d, want 1", got)
			}
		}
		advance(10 * time.Minute)
		if got := log.above(slog.LevelWarn); len(got) != 0 {
			t.Errorf("warnings: %q", got)
		}
		if got := log.above(slog.LevelDebug); slices.Contains(got, "warm pool refill failed") {
			t.Errorf("the refill failed (and backed off) for want of the image: %q", got)
		}
		checks := 0
		for _, c := range e.rt.Calls() {
			if c == "ImageID "+ciImage {
				checks++
			}
		}
		// Every Recheck (15 s) and on each claim: ~40 in 10 minutes.
		if checks > 60 {
			t.Errorf("%d image checks in 10 minutes", checks)
		}

		e.rt.Rebuild(ciImage) // `warren image build code-interpreter`
		advance(Recheck)
		if got := len(e.pooledOf(ciArgs)); got != 1 {
			t.Fatalf("code-interpreter pool %v after the image was built = %d, want 1", Recheck, got)
		}
		if id := e.create(t, ciID); id == "" {
			t.Error("code-interpreter create found nothing to claim once the image was built")
		}

		// Removed again: its pooled container goes, quietly.
		synctest.Wait()
		if err := e.rt.RemoveImage(context.Background(), ciImage); err != nil {
			t.Fatal(err)
		}
		advance(Recheck)
		if got := len(e.pooledOf(ciArgs)); got != 0 {
			t.Errorf("code-interpreter pool after the image was removed = %d, want 0", got)
		}
		if got := log.above(slog.LevelWarn); len(got) != 0 {
			t.Errorf("warnings: %q", got)
		}
	})
}

// A code-interpreter image labelled for gVisor gets pooled containers
// under gVisor, which its gVisor creates claim and runc ones do not.
func TestPoolCodeInterpreterRuntimeLabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(1, 1), func(d *Deps) {
			d.Templates.(*templates).rt.SetImageLabels(ciImage, map[string]string{sandbox.LabelRuntime: "gvisor"})
		}, baseImage, ciImage)
		synctest.Wait()
		ci := e.pooledOf(ciArgs)
		if len(ci) != 1 || ci[0].Labels[sandbox.LabelRuntime] != "gvisor" {
			t.Fatalf("code-interpreter pool: %+v, want one gvisor container", ci)
		}
		if base := e.pooledOf(nil); len(base) != 1 || base[0].Labels[sandbox.LabelRuntime] != "runc" {
			t.Errorf("base pool: %+v, want one runc container", base)
		}
		if id := e.create(t, ciID); id != ci[0].ID {
			t.Errorf("a gVisor create claimed %q, want %s", id, ci[0].ID)
		}
		synctest.Wait()
		// The label is gone (the image was rebuilt without it, under the
		// same ID here): a gVisor container no longer fits a runc create.
		ci = e.pooledOf(ciArgs)
		e.rt.SetImageLabels(ciImage, nil)
		if id := e.create(t, ciID); id != "" {
			t.Errorf("a runc create claimed %s; the pooled gVisor container is %s", id, ci[0].ID)
		}
	})
}

// A pooled code-interpreter container that stopped (dockerd restarted) is
// pruned and replaced.
func TestPoolCodeInterpreterDropsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, settings(1, 1), nil, baseImage, ciImage)
		synctest.Wait()
		old := e.pooledOf(ciArgs)
		e.rt.StopAll()
		e.reconcile(t)
		synctest.Wait()
		if slices.ContainsFunc(e.rt.Containers(), func(c sandbox.Container) bool { return c.ID == old[0].ID }) {
			t.Error("stopped pooled container kept")
		}
		got := e.pooledOf(ciArgs)
		if len(got) != 1 || !got[0].Running {
			t.Fatalf("code-interpreter pool after reconcile: %+v", got)
		}
		if id := e.create(t, ciID); id != got[0].ID {
			t.Errorf("claimed %q, want the fresh %s", id, got[0].ID)
		}
	})
}
