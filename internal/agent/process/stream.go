package process

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/warrenhq/warren/proto/process"
)

const (
	// defaultKeepalive is envd's idle interval between keepalive events.
	defaultKeepalive = 90 * time.Second
	// minKeepalive bounds fractional intervals so a client cannot make the
	// agent spin.
	minKeepalive = 10 * time.Millisecond
	maxKeepalive = 24 * time.Hour
)

// Connect reattaches to a process: start{pid}, then live output and the
// end; for a recently exited process, start and end are replayed.
func (s *Service) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	p, err := s.find(req.Msg.GetProcess(), false)
	if err != nil {
		return err
	}
	sub := newSubscriber()
	end := p.subscribe(sub)
	return s.follow(ctx, req.Header(), p, sub, end, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

// follow sends start{pid} and then the events of sub until the end, sending
// keepalives whenever the stream is idle. A non-nil end is replayed at once.
// It returns early, leaving the process running, when the client goes away.
func (s *Service) follow(ctx context.Context, h http.Header, p *proc, sub *subscriber, end *process.ProcessEvent_EndEvent, send func(*process.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	start := &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: p.pid}}}
	if err := send(start); err != nil {
		return err
	}
	if end != nil {
		return send(&process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}})
	}
	interval := keepaliveInterval(h)
	idle := time.NewTimer(interval)
	defer idle.Stop()
	for {
		select {
		case ev := <-sub.ch:
			if ev.GetEnd() != nil && deadlinePassed(ctx) {
				// The deadline killed the process (or came with its
				// end): the client hears of the deadline, as it would
				// had this select picked ctx.Done first. The process's
				// context has the same deadline on a timer of its own,
				// which may fire before ctx's: a loaded machine showed
				// its end first, and the client got "signal: killed".
				if err := ctx.Err(); err != nil {
					return err
				}
				return connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded)
			}
			if err := send(ev); err != nil {
				return err
			}
			if ev.GetEnd() != nil {
				return nil
			}
		case <-idle.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err() // connect-go maps it to canceled or deadline_exceeded
		}
		idle.Reset(interval)
	}
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds). Fractions are
// accepted so tests need not wait whole seconds.
func keepaliveInterval(h http.Header) time.Duration {
	secs, err := strconv.ParseFloat(h.Get("Keepalive-Ping-Interval"), 64)
	switch {
	case err != nil || !(secs > 0): // also rejects NaN
		return defaultKeepalive
	case secs > maxKeepalive.Seconds():
		return maxKeepalive
	}
	return max(time.Duration(secs*float64(time.Second)), minKeepalive)
}

// deadlinePassed reports whether ctx has ended or its deadline has come,
// whether or not its timer has fired yet.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(dl)
}
