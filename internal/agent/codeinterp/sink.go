package codeinterp

import "sync"

// execSink is what the bash and node kernels share: it counts their
// executions and routes their output to the running one, if any.
type execSink struct {
	count int // executions so far; only begin touches it

	mu   sync.Mutex
	emit func(Output) // guarded by mu; the running execution's emit, nil when none or silent
}

// begin starts an execution: unless silent, it counts it, emits its count
// and sends the kernel's output to emit until end is called.
func (s *execSink) begin(emit func(Output), silent bool) (end func()) {
	if !silent {
		s.count++
		emit(countLine(s.count))
	}
	s.mu.Lock()
	s.emit = emit
	if silent {
		s.emit = nil
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.emit = nil
		s.mu.Unlock()
	}
}

// send forwards o to the running execution; without one it is dropped.
func (s *execSink) send(o Output) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.emit != nil {
		s.emit(o)
	}
}
