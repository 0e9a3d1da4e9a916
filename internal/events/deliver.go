package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// JSON is an event as E2B's events API and webhooks carry it.
type JSON struct {
	Version            string         `json:"version"`
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	EventData          map[string]any `json:"eventData"`
	SandboxBuildID     string         `json:"sandboxBuildId"`
	SandboxExecutionID string         `json:"sandboxExecutionId"`
	SandboxID          string         `json:"sandboxId"`
	SandboxTeamID      string         `json:"sandboxTeamId"`
	SandboxTemplateID  string         `json:"sandboxTemplateId"`
	Timestamp          time.Time      `json:"timestamp"`
}

// ToJSON returns ev in E2B's shape.
func ToJSON(ev sandbox.Event) JSON {
	return JSON{Version: "v1", ID: ev.ID, Type: string(ev.Type), EventData: ev.Data,
		SandboxBuildID: ev.BuildID, SandboxExecutionID: ev.ExecutionID, SandboxID: ev.SandboxID,
		SandboxTeamID: ev.TeamID, SandboxTemplateID: ev.TemplateID, Timestamp: ev.Time.UTC()}
}

// Signature is E2B's e2b-signature of body for secret: the SHA-256 of the
// secret followed by the raw body, in URL-safe base64 without padding.
func Signature(secret string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Delivery headers, as E2B sends them.
const (
	HeaderWebhookID        = "E2b-Webhook-Id"
	HeaderDeliveryID       = "E2b-Delivery-Id"
	HeaderSignatureVersion = "E2b-Signature-Version"
	HeaderSignature        = "E2b-Signature"
)

// Start runs the dispatcher and the retention sweep until Close.
func (s *Service) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	dialer := &net.Dialer{Timeout: s.cfg.Timeout, KeepAlive: 30 * time.Second}
	if !s.cfg.AllowPrivate {
		dialer.Control = dialControl
	}
	client := &http.Client{
		Timeout: s.cfg.Timeout,
		// A receiver's redirect is its answer, not somewhere to post to.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: perWebhook,
			IdleConnTimeout: time.Minute, TLSHandshakeTimeout: s.cfg.Timeout},
	}
	s.wg.Go(func() { s.dispatch(ctx, client) })
	s.wg.Go(func() { s.sweep(ctx) })
}

// Close stops delivering and waits; pending deliveries stay in the store
// for the next start.
func (s *Service) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// attempt makes one attempt of d and records its outcome; it returns
// when d is to be tried again, zero when it is done.
func (s *Service) attempt(ctx context.Context, client *http.Client, d sandbox.Delivery) time.Time {
	w, err := s.store.GetWebhook(ctx, d.WebhookID)
	if err != nil {
		d.Status, d.LastError = sandbox.DeliveryFailed, "the webhook is gone"
		s.save(ctx, d)
		return time.Time{}
	}
	ev, err := s.store.GetEvent(ctx, d.EventID)
	if err != nil {
		d.Status, d.LastError = sandbox.DeliveryFailed, "the event is gone (past the retention)"
		s.save(ctx, d)
		return time.Time{}
	}
	body, _ := json.Marshal(ToJSON(ev)) // a JSON of strings, maps and a time always marshals
	d.Attempts++
	d.LastStatus, err = post(ctx, client, w, body)
	now := time.Now().UTC()
	switch {
	case err == nil:
		d.Status, d.DeliveredAt, d.LastError = sandbox.DeliveryDelivered, now, ""
	case ctx.Err() != nil:
		return time.Time{} // stopping: the attempt does not count
	case d.Attempts >= s.cfg.MaxAttempts:
		d.Status, d.LastError = sandbox.DeliveryFailed, err.Error()
		s.log.Warn("webhook delivery failed for good", logkey.Webhook, w.ID, "delivery", d.ID, "attempts", d.Attempts, "err", errors.Unwrap(err))
	default:
		d.LastError = err.Error()
		d.NextAttempt = now.Add(s.backoff(d.Attempts))
	}
	s.save(ctx, d)
	if d.Status == sandbox.DeliveryPending {
		return d.NextAttempt
	}
	return time.Time{}
}

func (s *Service) save(ctx context.Context, d sandbox.Delivery) {
	if err := s.store.PutDelivery(context.WithoutCancel(ctx), d); err != nil {
		s.log.Error("cannot save webhook delivery", "delivery", d.ID, "err", err)
	}
}

// backoff is the wait after attempt n (from 1) failed.
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// post sends body to w, signed, and returns the answer's status; only a
// 2xx is a delivery.
func post(ctx context.Context, client *http.Client, w Webhook, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "warren-webhooks")
	req.Header.Set(HeaderWebhookID, w.ID)
	req.Header.Set(HeaderDeliveryID, uuid.NewString())
	req.Header.Set(HeaderSignatureVersion, "v1")
	req.Header.Set(HeaderSignature, Signature(w.Secret, body))
	res, err := client.Do(req)
	if err != nil {
		return 0, failure{reason: classify(err), cause: err}
	}
	defer res.Body.Close()
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode/100 != 2 {
		msg := "the receiver answered " + res.Status
		return res.StatusCode, failure{reason: msg, cause: errors.New(msg)}
	}
	return res.StatusCode, nil
}

// failure is a failed attempt: reason is what the delivery log shows,
// cause what the server's log does.
type failure struct {
	reason string
	cause  error
}

func (f failure) Error() string { return f.reason }
func (f failure) Unwrap() error { return f.cause }

// sweep deletes events past the retention, once at start and then hourly.
func (s *Service) sweep(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := s.store.DeleteEventsBefore(ctx, time.Now().Add(-s.cfg.Retention)); err != nil && ctx.Err() == nil {
			s.log.Warn("cannot delete old sandbox events", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
