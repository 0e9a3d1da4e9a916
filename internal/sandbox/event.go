package sandbox

import "time"

// EventType is the type of a sandbox lifecycle event, as E2B names it.
type EventType string

// The lifecycle events: E2B's events API and webhooks carry them.
const (
	EventCreated EventType = "sandbox.lifecycle.created"
	EventKilled  EventType = "sandbox.lifecycle.killed"
	EventUpdated EventType = "sandbox.lifecycle.updated"
	EventPaused  EventType = "sandbox.lifecycle.paused"
	EventResumed EventType = "sandbox.lifecycle.resumed"
)

// EventTypes are every EventType, in the order of a sandbox's life.
var EventTypes = []EventType{EventCreated, EventUpdated, EventPaused, EventResumed, EventKilled}

// Valid reports whether t is one of EventTypes.
func (t EventType) Valid() bool {
	for _, v := range EventTypes {
		if t == v {
			return true
		}
	}
	return false
}

// Event is one change in a sandbox's life: the lifecycle manager records
// it as it makes the change.
type Event struct {
	ID          string // a UUID
	Type        EventType
	Time        time.Time
	SandboxID   string
	TeamID      string
	TemplateID  string
	BuildID     string // the template build the sandbox runs; "" when none
	ExecutionID string // the run of the sandbox: new at create and at each resume
	// Data is what changed, when the type does not say it all (e.g.
	// "set_timeout" for an update, "mode" for a pause); nil = none.
	Data map[string]any
}

// Recorded is an event as it is stored: with a delivery to each webhook
// that takes it (internal/events prepares them). The lifecycle manager
// saves it with the change it tells of, in one write (Store.PutSandbox).
type Recorded struct {
	Event      Event
	Deliveries []Delivery
}

// DeliveryStatus is where a delivery is.
type DeliveryStatus string

const (
	DeliveryPending   DeliveryStatus = "pending"   // not yet accepted; will be tried again
	DeliveryDelivered DeliveryStatus = "delivered" // the receiver answered 2xx
	DeliveryFailed    DeliveryStatus = "failed"    // every attempt failed; no more are made
)

// Delivery is one event on its way to one webhook (internal/events
// delivers it).
type Delivery struct {
	ID        string
	WebhookID string
	EventID   string
	SandboxID string
	Status    DeliveryStatus
	Attempts  int
	// NextAttempt is when a pending delivery is tried next.
	NextAttempt time.Time
	// LastStatus is the HTTP status of the last attempt; 0 when it got
	// no answer (LastError says why) or none was made.
	LastStatus  int
	LastError   string
	CreatedAt   time.Time
	DeliveredAt time.Time // zero unless delivered
}
