package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// drainIdle is how long a draining server leaves a connection idle
// before it closes it. Closing an idle connection cuts a call its client
// sends on it at that moment: a client calling back to back sends its
// next call within a millisecond of an answer (and that answer closed
// the connection anyway), so one idle this long is not in such use. Left
// open, its client's next call (a create of seconds, say) would run on a
// process about to end: a force-deleted pod is killed ~2 s after its
// signal (the failover e2e's tenth run: a create sent 2.2 s after the
// signal on a connection idle since before it was cut at the kill).
const drainIdle = 250 * time.Millisecond

// idleConns keeps the HTTP port's idle keep-alive connections and since
// when (http.Server.ConnState), for Drain to close.
type idleConns struct {
	mu   sync.Mutex             // guards idle
	idle map[net.Conn]time.Time // since when each connection is idle
}

func (c *idleConns) track(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state != http.StateIdle {
		delete(c.idle, conn)
		return
	}
	if c.idle == nil {
		c.idle = map[net.Conn]time.Time{}
	}
	c.idle[conn] = time.Now()
}

// closeWhileDraining closes every connection idle for d, until stopped
// is closed.
func (c *idleConns) closeWhileDraining(d time.Duration, stopped <-chan struct{}) {
	t := time.NewTicker(d / 5)
	defer t.Stop()
	for {
		c.closeIdle(d)
		select {
		case <-stopped:
			return
		case <-t.C:
		}
	}
}

func (c *idleConns) closeIdle(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn, since := range c.idle {
		if time.Since(since) >= d {
			conn.Close()
			delete(c.idle, conn)
		}
	}
}
