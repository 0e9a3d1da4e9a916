package web

import (
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/api"
	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
)

func (s *server) webhookRoutes(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/webhooks", s.authed(s.listWebhooks))
	mux.Handle("POST /dashboard/api/webhooks", s.authed(s.createWebhook))
	mux.Handle("POST /dashboard/api/webhooks/{id}/enabled", s.authed(s.enableWebhook))
	mux.Handle("DELETE /dashboard/api/webhooks/{id}", s.authed(s.deleteWebhook))
	mux.Handle("GET /dashboard/api/webhooks/{id}/deliveries", s.authed(s.webhookDeliveries))
}

// webhookJSON is a webhook as the view shows it; its secret never is.
type webhookJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
}

func webhookOut(w events.Webhook) webhookJSON {
	out := webhookJSON{ID: w.ID, Name: w.Name, URL: w.URL, Enabled: w.Enabled, Events: []string{}, CreatedAt: w.CreatedAt}
	for _, t := range w.Events {
		out.Events = append(out.Events, string(t))
	}
	return out
}

func (s *server) eventsService() (*events.Service, error) {
	if s.cfg.Events == nil {
		return nil, sandbox.Errorf(sandbox.KindUnavailable, "this server keeps no lifecycle events")
	}
	return s.cfg.Events, nil
}

func (s *server) listWebhooks(w http.ResponseWriter, r *http.Request, team string) error {
	evs, err := s.eventsService()
	if err != nil {
		return err
	}
	hooks, err := evs.Webhooks(r.Context(), team)
	if err != nil {
		return err
	}
	out := make([]webhookJSON, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, webhookOut(h))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// createWebhook registers a webhook through the events service, which
// validates it as the API's POST /events/webhooks does.
func (s *server) createWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	evs, err := s.eventsService()
	if err != nil {
		return err
	}
	var body struct {
		Name   string   `json:"name"`
		URL    string   `json:"url"`
		Secret string   `json:"signatureSecret"`
		Events []string `json:"events"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	spec := events.WebhookSpec{Name: &body.Name, URL: &body.URL, Secret: &body.Secret}
	for _, t := range body.Events {
		spec.Events = append(spec.Events, sandbox.EventType(t))
	}
	hook, err := evs.CreateWebhook(r.Context(), team, spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, webhookOut(hook))
	return nil
}

func (s *server) enableWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	evs, err := s.eventsService()
	if err != nil {
		return err
	}
	var body struct {
		Enabled bool `json:"enabled"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	hook, err := evs.UpdateWebhook(r.Context(), team, r.PathValue("id"), events.WebhookSpec{Enabled: &body.Enabled})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, webhookOut(hook))
	return nil
}

func (s *server) deleteWebhook(w http.ResponseWriter, r *http.Request, team string) error {
	evs, err := s.eventsService()
	if err != nil {
		return err
	}
	if err := evs.DeleteWebhook(r.Context(), team, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// webhookDeliveries is a webhook's delivery log, newest first.
func (s *server) webhookDeliveries(w http.ResponseWriter, r *http.Request, team string) error {
	evs, err := s.eventsService()
	if err != nil {
		return err
	}
	ds, err := evs.Deliveries(r.Context(), team, r.PathValue("id"), 100)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Deliveries(ds))
	return nil
}
