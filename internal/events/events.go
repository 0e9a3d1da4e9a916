// Package events keeps sandboxes' lifecycle events and delivers them to
// webhooks, as E2B's events API and webhooks do. The lifecycle manager
// prepares each event as it changes a sandbox (Service.Prepare: the event
// with a delivery to each webhook that takes it) and the store saves it
// with the change, in one transaction; the API lists them and manages a
// team's webhooks through the Service; the Service's dispatcher POSTs
// every event to the enabled webhooks of its team that subscribe to its
// type, signed with the webhook's secret, retried with backoff, in order
// per sandbox and webhook. Events and deliveries are in the store with
// the change they tell of, so a restart or a lost leader loses none. It
// owns no sandbox state and never calls the lifecycle manager.
package events

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Webhook is where a team's events go.
type Webhook struct {
	ID      string
	TeamID  string
	Name    string
	URL     string
	Enabled bool
	Events  []sandbox.EventType // the types it gets; never empty
	// Secret signs deliveries (e2b-signature); no response carries it.
	Secret    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// wants reports whether w takes events of type t now.
func (w Webhook) wants(t sandbox.EventType) bool { return w.Enabled && slices.Contains(w.Events, t) }

// Query selects a team's events.
type Query struct {
	TeamID    string
	SandboxID string // "" = every sandbox of the team
	Offset    int
	Limit     int
	Ascending bool      // oldest first; default newest first
	Before    time.Time // only events before it; zero = all
}

// Store keeps events, webhooks and deliveries. Missing records are
// *sandbox.Error of KindNotFound.
type Store interface {
	// AddEvent stores ev with its deliveries, in one transaction.
	AddEvent(ctx context.Context, ev sandbox.Event, deliveries []sandbox.Delivery) error
	GetEvent(ctx context.Context, id string) (sandbox.Event, error)
	Events(ctx context.Context, q Query) ([]sandbox.Event, error)

	PutWebhook(ctx context.Context, w Webhook) error
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	// ListWebhooks returns a team's webhooks (all when teamID is ""),
	// oldest first.
	ListWebhooks(ctx context.Context, teamID string) ([]Webhook, error)
	// DeleteWebhook removes a webhook and its deliveries.
	DeleteWebhook(ctx context.Context, id string) error

	// DueDeliveries returns, oldest first, the pending deliveries due by
	// now that are each the oldest pending one of their webhook and
	// sandbox (a later event waits for the earlier ones), at most
	// perWebhook of each webhook.
	DueDeliveries(ctx context.Context, now time.Time, perWebhook int) ([]sandbox.Delivery, error)
	PutDelivery(ctx context.Context, d sandbox.Delivery) error
	// Deliveries returns a webhook's newest deliveries, newest first.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]sandbox.Delivery, error)

	// DeleteEventsBefore removes older events, and the deliveries that
	// are done with them.
	DeleteEventsBefore(ctx context.Context, t time.Time) error
}

// Defaults of Config.
const (
	DefaultRetention = 7 * 24 * time.Hour // E2B's
	DefaultTimeout   = 10 * time.Second
)

// Config configures a Service.
type Config struct {
	Store  Store        // required
	Logger *slog.Logger // nil = discard
	// Retention is how long events (and finished deliveries) are kept;
	// default DefaultRetention.
	Retention time.Duration
	// Timeout bounds one delivery attempt; default DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts a delivery gets before it is failed; default 10, the
	// last about 13 minutes after the first with the default backoff.
	MaxAttempts int
	// Backoff is the wait after a first failed attempt, doubled after
	// each further one up to MaxBackoff; defaults 1 s and 5 min.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// AllowPrivate lets webhooks target loopback, link-local, private and
	// this host's own addresses; default false: such a URL is refused when
	// set and such an address when a delivery connects.
	AllowPrivate bool
}

// Service records events and serves the events and webhook APIs; its
// dispatcher delivers. Create it with New, Start it, Close it.
type Service struct {
	cfg   Config
	store Store
	log   *slog.Logger
	wake  chan struct{} // a new delivery is due; buffered, one slot

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Service; nothing is delivered before Start.
func New(cfg Config) *Service {
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	return &Service{cfg: cfg, store: cfg.Store, log: logkey.For(cfg.Logger, "events"), wake: make(chan struct{}, 1)}
}

// Record stores ev, with a delivery to each enabled webhook of its team
// that takes its type, and wakes the dispatcher: an event that tells of
// no change of a sandbox's state (a sandbox's change is stored with its
// event: Prepare). It is best effort for the caller: a failure is logged,
// not returned.
func (s *Service) Record(ctx context.Context, ev sandbox.Event) {
	rec := s.Prepare(ctx, ev)
	if err := s.store.AddEvent(context.WithoutCancel(ctx), rec.Event, rec.Deliveries); err != nil {
		s.log.Error("cannot record sandbox event", logkey.Sandbox, ev.SandboxID, "type", ev.Type, "err", err)
		return
	}
	s.Stored(rec)
}

// Prepare returns ev as it is stored, without storing it: its ID and
// time set when they are not, with a delivery to each enabled webhook of
// its team that takes its type. Its caller stores it with the change it
// tells of (sandbox.Store.PutSandbox), then calls Stored. Webhooks that
// cannot be listed leave the event without deliveries, logged: the
// change goes on.
func (s *Service) Prepare(ctx context.Context, ev sandbox.Event) sandbox.Recorded {
	if ev.ID == "" {
		ev.ID = uuid.NewString()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	hooks, err := s.store.ListWebhooks(context.WithoutCancel(ctx), ev.TeamID)
	if err != nil {
		s.log.Error("cannot list webhooks; event kept without deliveries", logkey.Sandbox, ev.SandboxID, "type", ev.Type, "err", err)
	}
	rec := sandbox.Recorded{Event: ev}
	for _, w := range hooks {
		if w.wants(ev.Type) {
			rec.Deliveries = append(rec.Deliveries, sandbox.Delivery{ID: uuid.NewString(), WebhookID: w.ID, EventID: ev.ID,
				SandboxID: ev.SandboxID, Status: sandbox.DeliveryPending, NextAttempt: ev.Time, CreatedAt: ev.Time})
		}
	}
	return rec
}

// Stored tells the dispatcher that recs are stored: it wakes for their
// deliveries.
func (s *Service) Stored(recs ...sandbox.Recorded) {
	for _, rec := range recs {
		if len(rec.Deliveries) > 0 {
			select {
			case s.wake <- struct{}{}:
			default:
			}
			return
		}
	}
}

// Events returns the events q selects.
func (s *Service) Events(ctx context.Context, q Query) ([]sandbox.Event, error) {
	return s.store.Events(ctx, q)
}

// WebhookSpec is what a client sets on a webhook; nil fields are left as
// they are by an update (and are required, or defaulted, by a create).
type WebhookSpec struct {
	Name    *string
	URL     *string
	Enabled *bool
	Events  []sandbox.EventType // nil = unchanged (create: every type)
	Secret  *string
}

// Limits of what a client may set on a webhook.
const (
	maxWebhookName   = 256
	maxWebhookURL    = 2048
	maxWebhookSecret = 1024
	maxWebhooks      = 100 // per team
)

// CreateWebhook registers a webhook for team.
func (s *Service) CreateWebhook(ctx context.Context, team string, spec WebhookSpec) (Webhook, error) {
	if spec.URL == nil {
		return Webhook{}, sandbox.Errorf(sandbox.KindInvalid, "url is required")
	}
	if spec.Secret == nil || *spec.Secret == "" {
		return Webhook{}, sandbox.Errorf(sandbox.KindInvalid, "signatureSecret is required: deliveries are signed with it (e2b-signature)")
	}
	hooks, err := s.store.ListWebhooks(ctx, team)
	if err != nil {
		return Webhook{}, err
	}
	if len(hooks) >= maxWebhooks {
		return Webhook{}, sandbox.Errorf(sandbox.KindInvalid, "a team has at most %d webhooks: delete one first", maxWebhooks)
	}
	now := time.Now().UTC()
	w := Webhook{ID: uuid.NewString(), TeamID: team, Enabled: true, Events: sandbox.EventTypes, CreatedAt: now, UpdatedAt: now}
	if err := s.apply(ctx, &w, spec); err != nil {
		return Webhook{}, err
	}
	if w.Name == "" {
		w.Name = w.ID
	}
	if err := s.store.PutWebhook(ctx, w); err != nil {
		return Webhook{}, err
	}
	s.log.Info("webhook registered", logkey.Webhook, w.ID, logkey.Team, team)
	return w, nil
}

// UpdateWebhook changes what spec sets on team's webhook id.
func (s *Service) UpdateWebhook(ctx context.Context, team, id string, spec WebhookSpec) (Webhook, error) {
	w, err := s.Webhook(ctx, team, id)
	if err != nil {
		return Webhook{}, err
	}
	if spec.Secret != nil && *spec.Secret == "" {
		return Webhook{}, sandbox.Errorf(sandbox.KindInvalid, "signatureSecret cannot be empty")
	}
	if err := s.apply(ctx, &w, spec); err != nil {
		return Webhook{}, err
	}
	w.UpdatedAt = time.Now().UTC()
	if err := s.store.PutWebhook(ctx, w); err != nil {
		return Webhook{}, err
	}
	return w, nil
}

// Webhook returns team's webhook id; another team's is KindNotFound.
func (s *Service) Webhook(ctx context.Context, team, id string) (Webhook, error) {
	w, err := s.store.GetWebhook(ctx, id)
	if err != nil || w.TeamID != team {
		if err == nil || sandbox.KindOf(err) == sandbox.KindNotFound {
			return Webhook{}, sandbox.Errorf(sandbox.KindNotFound, "webhook '%s' not found", id)
		}
		return Webhook{}, err
	}
	return w, nil
}

// Webhooks returns team's webhooks, oldest first.
func (s *Service) Webhooks(ctx context.Context, team string) ([]Webhook, error) {
	return s.store.ListWebhooks(ctx, team)
}

// DeleteWebhook removes team's webhook id and its pending deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, team, id string) error {
	if _, err := s.Webhook(ctx, team, id); err != nil {
		return err
	}
	return s.store.DeleteWebhook(ctx, id)
}

// Deliveries returns the newest deliveries (at most limit) of team's
// webhook id, newest first.
func (s *Service) Deliveries(ctx context.Context, team, id string, limit int) ([]sandbox.Delivery, error) {
	if _, err := s.Webhook(ctx, team, id); err != nil {
		return nil, err
	}
	return s.store.Deliveries(ctx, id, limit)
}

// apply checks spec and sets what it gives on w.
func (s *Service) apply(ctx context.Context, w *Webhook, spec WebhookSpec) error {
	if spec.Name != nil {
		if len(*spec.Name) > maxWebhookName || strings.ContainsFunc(*spec.Name, isControl) {
			return sandbox.Errorf(sandbox.KindInvalid, "name must be at most %d characters, without control characters", maxWebhookName)
		}
		w.Name = *spec.Name
	}
	if spec.URL != nil {
		if err := s.checkURL(ctx, *spec.URL); err != nil {
			return err
		}
		w.URL = *spec.URL
	}
	if spec.Enabled != nil {
		w.Enabled = *spec.Enabled
	}
	if spec.Events != nil {
		if len(spec.Events) == 0 {
			return sandbox.Errorf(sandbox.KindInvalid, "events must name at least one event type (%s)", typeList())
		}
		var types []sandbox.EventType
		for _, t := range spec.Events {
			if !t.Valid() {
				return sandbox.Errorf(sandbox.KindInvalid, "unknown event type '%s': want one of %s", t, typeList())
			}
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		w.Events = types
	}
	if spec.Secret != nil {
		if len(*spec.Secret) > maxWebhookSecret {
			return sandbox.Errorf(sandbox.KindInvalid, "signatureSecret must be at most %d bytes", maxWebhookSecret)
		}
		w.Secret = *spec.Secret
	}
	return nil
}

// checkURL accepts an absolute http or https URL, at a public address
// unless the operator allows private ones (target.go).
func (s *Service) checkURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxWebhookURL || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
		u.User != nil || strings.ContainsFunc(raw, isControl) {
		return sandbox.Errorf(sandbox.KindInvalid, "url must be an absolute http:// or https:// URL without credentials, at most %d characters", maxWebhookURL)
	}
	if s.cfg.AllowPrivate {
		return nil
	}
	return checkTarget(ctx, u)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func typeList() string {
	var s []string
	for _, t := range sandbox.EventTypes {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}
