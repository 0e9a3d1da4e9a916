package events_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

// A webhook is no port scanner: without AllowPrivate, a URL on loopback,
// link-local, a private range or this host is refused with the rule it
// breaks, on create and on update; with it, the same URLs are taken.
func TestPrivateTargetsRefused(t *testing.T) {
	ctx := context.Background()
	strict := events.New(events.Config{Store: openStore(t, ":memory:")})
	open := events.New(events.Config{Store: openStore(t, ":memory:"), AllowPrivate: true})
	for _, tc := range []struct{ url, rule string }{
		{"http://127.0.0.1:1/", "loopback"},
		{"http://127.9.9.9/", "loopback"},
		{"http://[::1]:3000/", "loopback"},
		{"http://localhost:3000/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://0.0.0.0:22/", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://[fe80::1]/", "link-local"},
		{"http://10.1.2.3/", "private"},
		{"https://172.17.0.1:2375/", "private"},
		{"http://192.168.0.1/", "private"},
		{"http://[fd00::1]/", "private"},
		{"http://100.64.0.1/", "private"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			_, err := strict.CreateWebhook(ctx, "team1", events.WebhookSpec{URL: ptr(tc.url), Secret: ptr("k")})
			if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(err.Error(), tc.rule) ||
				!strings.Contains(err.Error(), "--webhook-allow-private") {
				t.Errorf("create: %v, want KindInvalid naming %q and the flag", err, tc.rule)
			}
			if _, err := open.CreateWebhook(ctx, "team1", events.WebhookSpec{URL: ptr(tc.url), Secret: ptr("k")}); err != nil {
				t.Errorf("allowed private: %v", err)
			}
		})
	}
	if hooks, _ := strict.Webhooks(ctx, "team1"); len(hooks) != 0 {
		t.Errorf("refused webhooks were stored: %d", len(hooks))
	}
}

// The rule holds at every connection, on the address dialled: a webhook
// whose name resolves to loopback by the time it is delivered (stored as
// if it had resolved elsewhere when set) never reaches the listener there,
// and its log names the rule, not the address.
func TestPrivateTargetRefusedAtDelivery(t *testing.T) {
	db := openStore(t, ":memory:")
	rc := newReceiver(t, 0)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(rc.srv.URL, "http://"))
	now := time.Now().UTC()
	w := events.Webhook{ID: "rebound", TeamID: "team1", URL: "http://localhost:" + port + "/", Enabled: true,
		Events: sandbox.EventTypes, Secret: "k", CreatedAt: now, UpdatedAt: now}
	if err := db.PutWebhook(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	s := events.New(events.Config{Store: db, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxAttempts: 2})
	s.Start(context.Background())
	t.Cleanup(s.Close)
	s.Record(context.Background(), event("team1", "isb1", sandbox.EventCreated))
	d := waitDone(t, s, w.ID)
	if d.Status != sandbox.DeliveryFailed || !strings.Contains(d.LastError, "loopback") ||
		strings.Contains(d.LastError, "127.0.0.1") || strings.Contains(d.LastError, port) {
		t.Errorf("delivery %+v, want failed for a loopback address, without the address", d)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.calls != 0 {
		t.Errorf("the loopback receiver got %d requests", rc.calls)
	}
}

// The delivery log says why an attempt failed in a few words, never with
// the raw dial error (which names the server's addresses).
func TestDeliveryErrorsClassified(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	hang := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); silent.Close() })
	tlsOnly := httptest.NewTLSServer(http.NotFoundHandler()) // its certificate is not trusted
	t.Cleanup(tlsOnly.Close)
	for _, tc := range []struct {
		name, url, want string
		timeout         time.Duration
	}{
		{"refused", closed.URL, "connection refused", 10 * time.Second},
		{"timeout", silent.URL, "timeout", 200 * time.Millisecond},
		{"tls", tlsOnly.URL, "TLS error", 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openStore(t, ":memory:")
			s := events.New(events.Config{Store: db, AllowPrivate: true, Timeout: tc.timeout,
				Backoff: 5 * time.Millisecond, MaxAttempts: 1})
			s.Start(context.Background())
			t.Cleanup(s.Close)
			w := hook(t, s, "team1", tc.url)
			s.Record(context.Background(), event("team1", "isb1", sandbox.EventCreated))
			if d := waitDone(t, s, w.ID); d.LastError != tc.want {
				t.Errorf("lastError %q, want %q", d.LastError, tc.want)
			}
		})
	}
}

// waitDone waits for the first delivery of webhook id to be done.
func waitDone(t *testing.T, s *events.Service, id string) sandbox.Delivery {
	t.Helper()
	var d sandbox.Delivery
	waitFor(t, "the delivery to be done", func() bool {
		ds, _ := s.Deliveries(context.Background(), "team1", id, 1)
		if len(ds) == 1 && ds[0].Status != sandbox.DeliveryPending {
			d = ds[0]
			return true
		}
		return false
	})
	return d
}
