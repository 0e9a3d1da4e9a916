package events

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// The dispatcher starts each due delivery as soon as the bounds below
// let it, and never waits for one attempt to start another: a receiver
// that accepts and never answers holds one slot of its webhook and team
// for --webhook-timeout, not the other teams' deliveries. Order is kept
// per webhook and sandbox, as the store hands out only the oldest
// pending delivery of each pair, and a pair has one attempt at a time.
const (
	perWebhook  = 4   // attempts at once to one webhook
	perTeam     = 16  // attempts at once to one team's webhooks
	maxInFlight = 256 // attempts at once in all
)

// idlePoll is how often the dispatcher looks for due deliveries when
// nothing tells it of one sooner.
const idlePoll = time.Second

// outcome is a finished attempt: when its delivery is tried again (zero
// if done).
type outcome struct {
	d     sandbox.Delivery
	team  string
	retry time.Time
}

// flight is what is being attempted; the dispatcher's goroutine alone
// uses it.
type flight struct {
	ids       map[string]bool // deliveries being attempted
	byWebhook map[string]int
	byTeam    map[string]int
	total     int
	// served orders a team's webhooks: the one started least recently
	// goes first. It counts starts; a webhook's last one is its value.
	served   map[string]int
	starts   int
	nextTeam int // rotates which team is offered a slot first
}

func newFlight() *flight {
	return &flight{ids: map[string]bool{}, byWebhook: map[string]int{}, byTeam: map[string]int{}, served: map[string]int{}}
}

func (f *flight) fits(d sandbox.Delivery, team string) bool {
	return !f.ids[d.ID] && f.byWebhook[d.WebhookID] < perWebhook && f.byTeam[team] < perTeam && f.total < maxInFlight
}

func (f *flight) add(d sandbox.Delivery, team string) {
	f.ids[d.ID] = true
	f.byWebhook[d.WebhookID]++
	f.byTeam[team]++
	f.total++
	f.starts++
	f.served[d.WebhookID] = f.starts
}

func (f *flight) remove(o outcome) {
	delete(f.ids, o.d.ID)
	f.byWebhook[o.d.WebhookID]--
	f.byTeam[o.team]--
	f.total--
	if f.byWebhook[o.d.WebhookID] == 0 {
		delete(f.byWebhook, o.d.WebhookID)
	}
	if f.byTeam[o.team] == 0 {
		delete(f.byTeam, o.team)
	}
}

// pick chooses what to start of the due deliveries (oldest first) of
// the teams teamOf tells: one per team in turn, each team's least
// recently served webhook first, within the bounds.
func (f *flight) pick(due []sandbox.Delivery, teamOf func(webhookID string) string) []sandbox.Delivery {
	queues := map[string][]sandbox.Delivery{}
	var teams []string
	for _, d := range due {
		t := teamOf(d.WebhookID)
		if _, ok := queues[t]; !ok {
			teams = append(teams, t)
		}
		queues[t] = append(queues[t], d)
	}
	if len(teams) == 0 {
		return nil
	}
	slices.Sort(teams)
	f.nextTeam = (f.nextTeam + 1) % len(teams)
	teams = append(teams[f.nextTeam:], teams[:f.nextTeam]...)
	for _, t := range teams {
		slices.SortStableFunc(queues[t], func(a, b sandbox.Delivery) int { return cmp.Compare(f.served[a.WebhookID], f.served[b.WebhookID]) })
	}
	var start []sandbox.Delivery
	for progress := true; progress; {
		progress = false
		for _, t := range teams {
			q := queues[t]
			i := slices.IndexFunc(q, func(d sandbox.Delivery) bool { return f.fits(d, t) })
			if i < 0 {
				continue
			}
			f.add(q[i], t)
			start = append(start, q[i])
			queues[t] = slices.Delete(q, i, i+1)
			progress = true
		}
	}
	return start
}

// dispatch starts what is due whenever an event is recorded, an attempt
// ends, a retry falls due, or idlePoll passes.
func (s *Service) dispatch(ctx context.Context, client *http.Client) {
	f := newFlight()
	done := make(chan outcome)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var retry time.Time // the soonest retry an attempt asked for; zero: none known
	for {
		s.startDue(ctx, client, f, done)
		wait := idlePoll
		if !retry.IsZero() {
			wait = max(min(wait, time.Until(retry)), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
			if !retry.After(time.Now()) {
				retry = time.Time{}
			}
		case o := <-done:
			f.remove(o)
			if !o.retry.IsZero() && (retry.IsZero() || o.retry.Before(retry)) {
				retry = o.retry
			}
		}
	}
}

// startDue starts the due deliveries that f lets start, each in a
// goroutine that reports its outcome on done.
func (s *Service) startDue(ctx context.Context, client *http.Client, f *flight, done chan<- outcome) {
	due, err := s.store.DueDeliveries(ctx, time.Now().UTC(), perWebhook)
	var hooks []Webhook
	if err == nil && len(due) > 0 {
		hooks, err = s.store.ListWebhooks(ctx, "")
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("cannot read due webhook deliveries", "err", err)
		}
		return
	}
	if len(due) == 0 {
		return
	}
	teams := map[string]string{}
	for _, w := range hooks {
		teams[w.ID] = w.TeamID
	}
	for id := range f.served { // forget deleted webhooks
		if _, ok := teams[id]; !ok {
			delete(f.served, id)
		}
	}
	for _, d := range f.pick(due, func(id string) string { return teams[id] }) {
		team := teams[d.WebhookID]
		s.wg.Go(func() {
			o := outcome{d: d, team: team, retry: s.attempt(ctx, client, d)}
			select {
			case done <- o:
			case <-ctx.Done():
			}
		})
	}
}
