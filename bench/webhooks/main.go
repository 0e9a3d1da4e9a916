// Command webhooks measures how long one team's webhook delivery takes
// while another team's receivers accept and never answer: the events
// service as warren serve runs it (SQLite in a temporary file, the
// default 10 s attempt limit and backoff), team B with -stalled webhooks
// at a receiver that never answers and -b-events sandbox events, and
// team C with one webhook at a receiver that answers at once; every
// -every, team C records an event, and the program prints the time from
// the record to its arrival at C's receiver.
//
//	go run ./bench/webhooks [-stalled 100] [-b-events 5] [-samples 20] [-every 500ms]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

func main() {
	stalled := flag.Int("stalled", 100, "team B's webhooks at a receiver that never answers (at most 100)")
	bEvents := flag.Int("b-events", 5, "events team B records first (each one delivery per webhook)")
	samples := flag.Int("samples", 20, "team C's deliveries timed")
	every := flag.Duration("every", 500*time.Millisecond, "time between team C's events")
	flag.Parse()
	if err := run(*stalled, *bEvents, *samples, *every); err != nil {
		log.Fatal(err)
	}
}

func run(stalled, bEvents, samples int, every time.Duration) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "warren-bench-webhooks-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "warren.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	hang := make(chan struct{})
	sink := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer sink.Close()
	defer close(hang)
	arrived := make(chan time.Time, samples)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- time.Now()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer ok.Close()

	s := events.New(events.Config{Store: db, AllowPrivate: true}) // the receivers are on 127.0.0.1
	s.Start(ctx)
	defer s.Close()
	secret := "bench"
	for range stalled {
		if _, err := s.CreateWebhook(ctx, "teamB", events.WebhookSpec{URL: &sink.URL, Secret: &secret}); err != nil {
			return err
		}
	}
	if _, err := s.CreateWebhook(ctx, "teamC", events.WebhookSpec{URL: &ok.URL, Secret: &secret}); err != nil {
		return err
	}
	for i := range bEvents {
		s.Record(ctx, sandbox.Event{Type: sandbox.EventCreated, SandboxID: fmt.Sprintf("isbB%d", i), TeamID: "teamB"})
	}
	var lat []time.Duration
	for i := range samples {
		time.Sleep(every)
		t0 := time.Now()
		s.Record(ctx, sandbox.Event{Type: sandbox.EventCreated, SandboxID: fmt.Sprintf("isbC%d", i), TeamID: "teamC"})
		select {
		case t := <-arrived:
			lat = append(lat, t.Sub(t0))
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("team C's delivery %d did not arrive within 2 minutes", i)
		}
	}
	slices.Sort(lat)
	fmt.Printf("team C's delivery with team B's %d stalled webhooks (%d deliveries): p50 %v, p95 %v, max %v (%d samples)\n",
		stalled, stalled*bEvents, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*95/100].Round(time.Millisecond),
		lat[len(lat)-1].Round(time.Millisecond), len(lat))
	return nil
}
