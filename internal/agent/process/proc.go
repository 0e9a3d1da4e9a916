package process

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/warrenhq/warren/proto/process"
)

const (
	// Chunk sizes of data events, as envd sends them.
	pipeChunk = 32 << 10
	ptyChunk  = 16 << 10

	// drainGrace is how long output is still read after the process exits
	// while none arrives: a background child may hold the pipe or tty open
	// forever, and the end event must not wait for it.
	drainGrace = 100 * time.Millisecond
)

// proc is one started process. Its output is fanned out to the subscribers
// attached at the time it is read; with none attached it is dropped.
type proc struct {
	pid     uint32
	tag     *string                // nil when started without a tag
	config  *process.ProcessConfig // as requested, for List
	started time.Time
	cmd     *exec.Cmd
	cancel  context.CancelFunc // releases the process context (deadline timer)
	tty     *os.File           // PTY master; nil for pipe processes

	exited atomic.Bool // the process was reaped; readers only drain now

	writeMu sync.Mutex // serialises writes to stdin or the tty

	mu     sync.Mutex
	stdin  *os.File                       // guarded by mu; nil when stdin is /dev/null, closed, or a PTY
	subs   map[*subscriber]struct{}       // guarded by mu
	end    *process.ProcessEvent_EndEvent // guarded by mu; set once the process is reaped and drained
	forget *time.Timer                    // guarded by Service.mu; drops the exited process
}

// subscriber is one attached stream. gone is closed when the stream's
// handler returns, so senders never block on a client that left.
type subscriber struct {
	ch   chan *process.ProcessEvent
	gone chan struct{}
}

func newSubscriber() *subscriber {
	return &subscriber{ch: make(chan *process.ProcessEvent, 16), gone: make(chan struct{})}
}

func (p *proc) ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end != nil
}

func (p *proc) info() *process.ProcessInfo {
	return &process.ProcessInfo{
		Config: proto.CloneOf(p.config),
		Pid:    p.pid,
		Tag:    p.tag,
	}
}

// subscribe attaches sub, or returns the end event when the process is over.
func (p *proc) subscribe(sub *subscriber) *process.ProcessEvent_EndEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return p.end
	}
	p.subs[sub] = struct{}{}
	return nil
}

func (p *proc) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.subs[sub]; ok {
		delete(p.subs, sub)
		close(sub.gone)
	}
}

// broadcast delivers ev to every current subscriber. A slow client slows
// the reader (and so the process) rather than losing output.
func (p *proc) broadcast(ev *process.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for sub := range p.subs {
		subs = append(subs, sub)
	}
	p.mu.Unlock()
	for _, sub := range subs {
		select {
		case sub.ch <- ev:
		case <-sub.gone:
		}
	}
}

// pump reads one output stream until EOF (or, after exit, until it stays
// quiet for drainGrace) and broadcasts it in chunks of at most size bytes.
func (p *proc) pump(f *os.File, size int, wrap func([]byte) *process.ProcessEvent_DataEvent) {
	buf := make([]byte, size)
	for {
		if p.exited.Load() {
			_ = f.SetReadDeadline(time.Now().Add(drainGrace))
		}
		n, err := f.Read(buf)
		if n > 0 {
			data := wrap(append([]byte(nil), buf[:n]...))
			p.broadcast(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: data}})
		}
		if err != nil {
			return
		}
	}
}

// wait reaps the process, lets the readers drain, and publishes the end.
func (p *proc) wait(outputs []*os.File, readers *sync.WaitGroup) *process.ProcessEvent_EndEvent {
	err := p.cmd.Wait()
	p.exited.Store(true)
	for _, f := range outputs {
		_ = f.SetReadDeadline(time.Now().Add(drainGrace))
	}
	readers.Wait()
	for _, f := range outputs {
		_ = f.Close()
	}
	p.cancel()

	st := p.cmd.ProcessState
	end := &process.ProcessEvent_EndEvent{
		ExitCode: int32(st.ExitCode()),
		Exited:   st.Exited(),
		Status:   st.String(),
	}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}

	p.mu.Lock()
	p.end = end
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
	p.mu.Unlock()

	// Subscribers stay registered so a handler leaving now still closes
	// its gone channel; new ones get the end from subscribe instead.
	p.broadcast(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}})
	return end
}

// stopForgetting cancels the removal timer; the caller holds Service.mu.
func (p *proc) stopForgetting() {
	if p.forget != nil {
		p.forget.Stop()
	}
}
