package fake

import (
	"context"
	"slices"
	"sync"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Agent is a sandbox.Agent that records every Init and can be made to
// fail.
type Agent struct {
	mu    sync.Mutex                     // guards the fields below
	inits map[string][]sandbox.AgentInit // by address, in order
	err   error
	dead  map[string]bool // addresses whose agent never answers
}

var _ sandbox.Agent = (*Agent)(nil)

// NewAgent returns an agent that accepts every Init.
func NewAgent() *Agent {
	return &Agent{inits: map[string][]sandbox.AgentInit{}, dead: map[string]bool{}}
}

// Silence makes the agent at addr never answer: its Inits wait until their
// context ends, as a real client does for a container that died.
func (a *Agent) Silence(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dead[addr] = true
}

// Fail makes later Inits return err; nil clears it.
func (a *Agent) Fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

// WaitReady returns at once, or waits until ctx ends for an agent that
// never answers (Silence).
func (a *Agent) WaitReady(ctx context.Context, addr string) error {
	a.mu.Lock()
	dead := a.dead[addr]
	a.mu.Unlock()
	if dead {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// Init records init for addr.
func (a *Agent) Init(ctx context.Context, addr string, init sandbox.AgentInit) error {
	if err := a.WaitReady(ctx, addr); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.inits[addr] = append(a.inits[addr], init)
	return nil
}

// Inited returns what the agent at addr was last told, if anything.
func (a *Agent) Inited(addr string) (sandbox.AgentInit, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	inits := a.inits[addr]
	if len(inits) == 0 {
		return sandbox.AgentInit{}, false
	}
	return inits[len(inits)-1], true
}

// Inits returns every Init the agent at addr was given, in order.
func (a *Agent) Inits(addr string) []sandbox.AgentInit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.inits[addr])
}
