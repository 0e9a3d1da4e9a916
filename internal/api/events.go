package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/sandbox"
)

// E2B's lifecycle events API and webhooks (docs: sandbox/lifecycle-events-api
// and lifecycle-events-webhooks).

func (s *server) registerEvents(mux *http.ServeMux) {
	if s.events == nil {
		return
	}
	for pattern, h := range map[string]handler{
		"GET /events/sandboxes":                       s.teamEvents,
		"GET /events/sandboxes/{id}":                  s.sandboxEvents,
		"POST /events/webhooks":                       s.createWebhook,
		"GET /events/webhooks":                        s.listWebhooks,
		"GET /events/webhooks/{webhookID}":            s.getWebhook,
		"PATCH /events/webhooks/{webhookID}":          s.updateWebhook,
		"DELETE /events/webhooks/{webhookID}":         s.deleteWebhook,
		"GET /events/webhooks/{webhookID}/deliveries": s.webhookDeliveries, // Warren's own
	} {
		mux.Handle(pattern, s.wrap(h))
	}
}

// maxEventOffset bounds offset so that a query stays an index walk.
const maxEventOffset = 1_000_000

// eventQuery reads offset, limit and orderAsc.
func eventQuery(r *http.Request, team string) (events.Query, error) {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0, 0, maxEventOffset, "offset")
	if err != nil {
		return events.Query{}, err
	}
	limit, err := intParam(q.Get("limit"), 10, 1, 100, "limit")
	if err != nil {
		return events.Query{}, err
	}
	asc := false
	if v := q.Get("orderAsc"); v != "" {
		if asc, err = strconv.ParseBool(v); err != nil {
			return events.Query{}, sandbox.Errorf(sandbox.KindInvalid, "orderAsc must be true or false, not '%s'", v)
		}
	}
	return events.Query{TeamID: team, Offset: offset, Limit: limit, Ascending: asc}, nil
}

func (s *server) teamEvents(w http.ResponseWriter, r *http.Request, team string) error {
	q, err := eventQuery(r, team)
	if err != nil {
		return err
	}
	return s.writeEvents(w, r, q)
}

// sandboxEvents lists one sandbox's events, killed ones' too; another
// team's sandbox has none.
func (s *server) sandboxEvents(w http.ResponseWriter, r *http.Request, team string) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	q, err := eventQuery(r, team)
	if err != nil {
		return err
	}
	q.SandboxID = id
	return s.writeEvents(w, r, q)
}

func (s *server) writeEvents(w http.ResponseWriter, r *http.Request, q events.Query) error {
	evs, err := s.events.Events(r.Context(), q)
	if err != nil {
		return err
	}
	out := make([]events.JSON, 0, len(evs))
	for _, ev := range evs {
		out = append(out, events.ToJSON(ev))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

// webhookJSON is a webhook as E2B's API shows it: never its secret.
type webhookJSON struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamID"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	Enabled   bool      `json:"enabled"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
}

func toWebhookJSON(h events.Webhook) webhookJSON {
	out := webhookJSON{ID: h.ID, TeamID: h.TeamID, Name: h.Name, CreatedAt: h.CreatedAt, Enabled: h.Enabled, URL: h.URL,
		Events: []string{}}
	for _, t := range h.Events {
		out.Events = append(out.Events, string(t))
	}
	return out
}

// webhookBody is what a client sends to create or change a webhook.
type webhookBody struct {
	Name            *string   `json:"name"`
	URL             *string   `json:"url"`
	Enabled         *bool     `json:"enabled"`
	Events          *[]string `json:"events"`
	SignatureSecret *string   `json:"signatureSecret"`
}

func (b webhookBody) spec() events.WebhookSpec {
	spec := events.WebhookSpec{Name: b.Name, URL: b.URL, Enabled: b.Enabled, Secret: b.SignatureSecret}
	if b.Events != nil {
		spec.Events = []sandbox.EventType{}
		for _, t := range *b.Events {
			spec.Events = append(spec.Events, sandbox.EventType(t))
		}
	}
	return spec
}

const webhookExample = `{"url": "http://127.0.0.1:8080/hook", "events": ["sandbox.lifecycle.created"], "signatureSecret": "..."}`

func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	var body webhookBody
	if err := decodeRequired(r, &body, webhookExample); err != nil {
		return err
	}
	h, err := s.events.CreateWebhook(r.Context(), team, body.spec())
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusCreated, toWebhookJSON(h))
	return nil
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request, team string) error {
	hooks, err := s.events.Webhooks(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]webhookJSON, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, toWebhookJSON(h))
	}
	httpedge.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	h, err := s.events.Webhook(r.Context(), team, r.PathValue("webhookID"))
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, toWebhookJSON(h))
	return nil
}

func (s *server) updateWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	var body webhookBody
	if err := decodeRequired(r, &body, `{"enabled": false}`); err != nil {
		return err
	}
	h, err := s.events.UpdateWebhook(r.Context(), team, r.PathValue("webhookID"), body.spec())
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, toWebhookJSON(h))
	return nil
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	if err := s.events.DeleteWebhook(r.Context(), team, r.PathValue("webhookID")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// Delivery is one delivery of a webhook's log, as the control plane's
// GET /events/webhooks/{id}/deliveries and the dashboard show it.
type Delivery struct {
	ID          string     `json:"id"`
	EventID     string     `json:"eventId"`
	SandboxID   string     `json:"sandboxId"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"` // pending only
	LastStatus  int        `json:"lastStatus,omitempty"`  // the receiver's last HTTP status
	LastError   string     `json:"lastError,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
}

// Deliveries turns a webhook's log into what the APIs answer.
func Deliveries(ds []sandbox.Delivery) []Delivery {
	out := make([]Delivery, 0, len(ds))
	for _, d := range ds {
		j := Delivery{ID: d.ID, EventID: d.EventID, SandboxID: d.SandboxID, Status: string(d.Status), Attempts: d.Attempts,
			LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt}
		if d.Status == sandbox.DeliveryPending && !d.NextAttempt.IsZero() {
			j.NextAttempt = &d.NextAttempt
		}
		if !d.DeliveredAt.IsZero() {
			j.DeliveredAt = &d.DeliveredAt
		}
		out = append(out, j)
	}
	return out
}

func (s *server) webhookDeliveries(w http.ResponseWriter, r *http.Request, team string) error {
	limit, err := intParam(r.URL.Query().Get("limit"), 100, 1, 1000, "limit")
	if err != nil {
		return err
	}
	ds, err := s.events.Deliveries(r.Context(), team, r.PathValue("webhookID"), limit)
	if err != nil {
		return err
	}
	httpedge.WriteJSON(w, http.StatusOK, Deliveries(ds))
	return nil
}
