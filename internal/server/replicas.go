package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/api"
	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/lifecycle"
	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// Leadership is the election among the replicas of one control plane that
// share a store (internal/leader): one replica leads, and runs what must
// run once and every change to a sandbox; every replica serves reads and
// the proxy, and forwards the rest to the leader.
type Leadership interface {
	// Run campaigns until ctx ends; lead runs once this replica leads,
	// with a context that ends when it stops; lost is called when Run
	// returns.
	Run(ctx context.Context, lead func(ctx context.Context), lost func())
	// Leader is the address (host:port) of the leading replica, or self;
	// an error while none is known.
	Leader(ctx context.Context) (addr string, self bool, err error)
	// Changed is closed when the leader changes next.
	Changed() <-chan struct{}
	// Unreachable says the leader's address could not be reached.
	Unreachable(addr string)
}

// forcedStop is a Leadership that tells whether this replica is about to
// be killed (internal/leader's Elector: its pod deleted with no grace).
// Without it, a stopping replica is never taken to be.
type forcedStop interface {
	Forced(ctx context.Context) bool
}

const (
	// leaderWait is how long a call that needs the leader waits for one
	// (a failover takes up to ~11 s) before it is answered 503 with
	// Retry-After.
	leaderWait = 20 * time.Second
	// headerForwarded carries a follower's proof (forwardProof) on what it
	// forwards to the leader.
	headerForwarded = "Warren-Forwarded"
	// headerNotLeader marks the answer of a replica that was forwarded a
	// call but does not lead (any more): nothing was done, the follower
	// looks for the leader again.
	headerNotLeader = "Warren-Not-Leader"
	// headerCallKey carries the key a follower gives each call it
	// forwards, the same on every try (callKeyed).
	headerCallKey = "Warren-Call-Key"
	// resumePrefix is the leader's internal endpoint a follower's proxy
	// asks to resume a paused sandbox for its traffic: POST resumePrefix+ID.
	resumePrefix = "/_warren/v1/resume/"
	// replayLimit is the largest body a forwarded call keeps to send
	// again to a new leader; a larger one is sent once.
	replayLimit = 8 << 20
)

// forwardProof is what the replicas present to each other: an HMAC of a
// secret they share, so that only a replica can mark a call as forwarded
// or ask the leader's internal endpoint.
func forwardProof(secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("warren: a call forwarded between control-plane replicas"))
	return hex.EncodeToString(mac.Sum(nil))
}

// replicas routes a replica's calls: reads and the proxy's traffic are
// served where they arrive; what changes a sandbox, a template or any
// record goes to the leader, which serves it as any client's call.
type replicas struct {
	lead    Leadership
	proof   string
	domain  string
	mgr     *lifecycle.Manager
	leading *atomic.Bool  // set once this replica's leader's work runs
	wait    time.Duration // leaderWait; shorter in tests
	// serving counts the changes this replica serves as the leader, which
	// a stepping-down leader lets finish (settle) before it hands on.
	serving atomic.Int64
	// forced is set once this stopping replica knows it is about to be
	// killed (checkForced): it refuses the clients' calls that need the
	// leader from then on.
	forced atomic.Bool
	// answers keeps forwarded calls' answers by their keys; nil = none
	// kept (a store no replicas share).
	answers store.CallAnswers
	log     *slog.Logger
	client  *http.Transport
}

// errDial marks a failure to reach a replica, before anything was sent:
// the call may go to another.
type errDial struct{ error }

func (e errDial) Unwrap() error { return e.error }

var errNotLeader = errors.New("the replica forwarded to does not lead")

func newReplicas(lead Leadership, secret, domain string, st store.Store, leading *atomic.Bool, log *slog.Logger) *replicas {
	d := &net.Dialer{Timeout: time.Second, KeepAlive: 15 * time.Second}
	t := &http.Transport{
		Proxy: nil,
		// A connection per call: one that cannot be opened is a call the
		// leader never saw, safe to send to the next; a kept-alive one
		// the leader closed as it went is not so clear.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, errDial{err}
			}
			return c, nil
		},
	}
	answers, _ := st.(store.CallAnswers)
	return &replicas{lead: lead, proof: forwardProof(secret), domain: domain, answers: answers, leading: leading, wait: leaderWait,
		log: logkey.For(log, "replicas"), client: t}
}

// local reports whether r is served by any replica: the proxy's traffic,
// and reads other than of templates (whose running builds only the leader
// knows).
func (rp *replicas) local(r *http.Request) bool {
	if proxy.IsSandboxRequest(r, rp.domain) {
		return true
	}
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.Contains(r.URL.Path, "/templates")
}

func (rp *replicas) forwarded(r *http.Request) bool {
	return hmac.Equal([]byte(r.Header.Get(headerForwarded)), []byte(rp.proof))
}

// handler serves next where it may, and forwards the rest to the leader.
func (rp *replicas) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, resumePrefix) && !proxy.IsSandboxRequest(r, rp.domain):
			rp.serveResume(w, r)
		case rp.local(r):
			r.Header.Del(headerForwarded)
			next.ServeHTTP(w, r)
		case rp.forced.Load() && !rp.forwarded(r) && !strings.HasPrefix(r.URL.Path, api.UploadPath):
			refuseForced(w)
		case rp.serveLeading(w, r, next):
		case rp.forwarded(r):
			rp.notLeader(w)
		default:
			rp.forward(w, r, next)
		}
	})
}

// serveLeading serves a change here while this replica leads, and
// reports whether it did. Counted before leading is read, a change is
// either seen by settle or sent on to the next leader.
func (rp *replicas) serveLeading(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	rp.serving.Add(1)
	defer rp.serving.Add(-1)
	if !rp.leading.Load() {
		return false
	}
	key := ""
	if rp.forwarded(r) {
		key = r.Header.Get(headerCallKey)
	}
	r.Header.Del(headerForwarded)
	r.Header.Del(headerCallKey)
	rp.callKeyed(w, r, key, next)
	return true
}

// settleLimit bounds how long a stepping-down leader waits for the
// changes it serves, holding the Lease: under the manifest's 45 s grace.
// A pod deleted with --grace-period=0 is killed ~2 s after its signal:
// a change still running then dies with it, and its Lease runs out (a
// failover of ~10 s instead of one), but a next leader never takes over
// beside a change that goes on (the failover e2e's seventh run lost a
// sandbox to a create finished after a 1.5 s bound: the next leader had
// removed its half-made pod).
const settleLimit = 40 * time.Second

// settle waits, once this replica no longer leads, for the changes it
// was serving as the leader to finish (up to settleLimit), so that the
// next leader does not take their sandboxes half made for strays.
func (rp *replicas) settle() {
	deadline := time.Now().Add(settleLimit)
	for rp.serving.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := rp.serving.Load(); n > 0 {
		rp.log.Warn("stepping down with changes still being served", "changes", n)
	}
}

func (rp *replicas) notLeader(w http.ResponseWriter) {
	w.Header().Set(headerNotLeader, "1")
	httpedge.WriteError(w, sandbox.Errorf(sandbox.KindUnavailable, "this control-plane replica does not lead"))
}

// forcedRetry is the Retry-After of a call a force-deleted replica
// refuses: by then kube-proxy sends the client's next connection to
// another replica, and this one is gone (~2 s after its signal).
const forcedRetry = time.Second

// checkForced asks, as this replica stops, whether it is about to be
// killed (its pod force-deleted: ~2 s after its signal), and if so has it
// refuse from then on every client's call that needs the leader, with 429
// and Retry-After (refuseForced): such a call would run on here past the
// kill (a create takes seconds, and a stepped-down leader waits for the
// next one), be cut, and E2B's SDK retries no cut call; a 429 saying
// when, it retries by itself (2.51: 3 times), on a new connection, which
// reaches another replica. Nothing was done for a call so refused, so
// sending it again is safe. Reads and the proxy's traffic are served as
// before (short, and the SDK retries none of the proxy's), and so are
// the calls other replicas forward (a stepped-down leader tells them it
// does not lead) and the build files' uploads (the SDK retries no body it
// streams). A replica stopped with its grace period serves on as it did.
// It reports whether the replica is forced.
func (rp *replicas) checkForced() bool {
	f, ok := rp.lead.(forcedStop)
	if !ok {
		return false
	}
	// The kill comes ~2 s after the signal: an answer later than that is
	// of no use.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if !f.Forced(ctx) {
		if ctx.Err() != nil {
			rp.log.Warn("stopping without knowing whether the pod was force-deleted: the API server did not answer in 2 s; the calls that need the leader are served as before")
		}
		return false
	}
	rp.forced.Store(true)
	rp.log.Info("force-deleted: the calls that need the leader are refused with 429 and Retry-After, for their clients to send them to another replica")
	return true
}

func refuseForced(w http.ResponseWriter) {
	httpedge.WriteError(w, sandbox.Limited("this control-plane replica is being killed (its pod was force-deleted): send the call again, it will reach another replica", forcedRetry))
}

// noLeader answers a call that found no leader in time.
func noLeader(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "5")
	httpedge.WriteError(w, sandbox.Errorf(sandbox.KindUnavailable, "no control-plane replica leads at the moment (a failover); try again"))
}

// onLeader calls try with the leader's address until it is done, this
// replica leads (errSelf), or leaderWait passes. try returns false when
// the leader could not be reached or did not lead: nothing was done, and
// the next leader is tried.
func (rp *replicas) onLeader(ctx context.Context, try func(addr string) bool) error {
	deadline := time.Now().Add(rp.wait)
	for {
		if rp.leading.Load() {
			return errSelf
		}
		changed := rp.lead.Changed()
		addr, self, err := rp.lead.Leader(ctx)
		if err == nil && !self {
			if try(addr) {
				return nil
			}
			rp.lead.Unreachable(addr)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return errNoLeader
		}
		t := time.NewTimer(min(wait, 250*time.Millisecond))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

var (
	errSelf     = errors.New("this replica leads")
	errNoLeader = errors.New("no leader")
)

// forward sends r to the leader and copies its answer back; once this
// replica leads, next serves it here. Every try carries the same call
// key, so that one sent again after its leader was lost during it is
// answered as the first was, or done once.
func (rp *replicas) forward(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, replay, err := keepBody(r)
	if err != nil {
		httpedge.WriteError(w, sandbox.Wrap(sandbox.KindInvalid, err, "cannot read the request's body"))
		return
	}
	r.Header.Del(headerForwarded)
	r.Header.Del(headerCallKey)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		r.Header.Set(headerCallKey, sandbox.NewToken())
	}
	err = rp.onLeader(r.Context(), func(addr string) bool {
		if rp.proxyTo(w, r, addr, body, replay) {
			return true
		}
		if !replay {
			noLeader(w) // its body may be partly sent: not tried again
			return true
		}
		return false
	})
	switch {
	case errors.Is(err, errSelf):
		if replay {
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		key := r.Header.Get(headerCallKey)
		r.Header.Del(headerCallKey)
		rp.callKeyed(w, r, key, next)
	case errors.Is(err, errNoLeader):
		noLeader(w)
	}
}

// answerLimit bounds the answer of a forwarded call kept to be replayed;
// a larger one is passed on as it comes, and not kept.
const answerLimit = 1 << 20

// callKeyed serves a forwarded call under its key (none: as any call):
// one whose answer is kept (an earlier try was done, and its answer lost
// with its leader) gets that answer again; any other is served with the
// key in its context (a create makes its sandbox under it: internal/
// lifecycle's WithCallKey), and its answer kept before it is sent, so
// that a try sent again finds it.
func (rp *replicas) callKeyed(w http.ResponseWriter, r *http.Request, key string, next http.Handler) {
	if key == "" || rp.answers == nil {
		next.ServeHTTP(w, r)
		return
	}
	a, ok, err := rp.answers.CallAnswer(r.Context(), key)
	if err != nil {
		httpedge.WriteError(w, sandbox.Wrap(sandbox.KindUnavailable, err, "cannot read the store"))
		return
	}
	if ok {
		rp.log.Info("a forwarded call sent again gets its first answer", "method", r.Method, "path", r.URL.Path, "status", a.Status)
		writeAnswer(w, a)
		return
	}
	rec := &answerRecorder{w: w, header: http.Header{}}
	next.ServeHTTP(rec, r.WithContext(lifecycle.WithCallKey(r.Context(), key)))
	if rec.passed {
		return
	}
	a = store.CallAnswer{Status: cmp.Or(rec.status, http.StatusOK), ContentType: rec.header.Get("Content-Type"), Body: rec.body.Bytes()}
	// A failure to reach a part of the server, or a limit met, may pass
	// on another try.
	if a.Status != http.StatusServiceUnavailable && a.Status != http.StatusBadGateway && a.Status != http.StatusTooManyRequests {
		if err := rp.answers.SaveCallAnswer(context.WithoutCancel(r.Context()), key, a); err != nil {
			rp.log.Warn("cannot keep a forwarded call's answer", "err", err)
		}
	}
	maps.Copy(w.Header(), rec.header)
	w.WriteHeader(a.Status)
	w.Write(a.Body)
}

func writeAnswer(w http.ResponseWriter, a store.CallAnswer) {
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.WriteHeader(a.Status)
	w.Write(a.Body)
}

// answerRecorder holds a call's answer until it is kept, up to
// answerLimit; past that it passes the answer on as it comes.
type answerRecorder struct {
	w      http.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
	passed bool // the answer outgrew answerLimit, and goes to w
}

// Unwrap lets http.ResponseController reach the connection's writer
// (its deadlines).
func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.w }

func (a *answerRecorder) Header() http.Header {
	if a.passed {
		return a.w.Header()
	}
	return a.header
}

func (a *answerRecorder) WriteHeader(status int) {
	if a.passed {
		a.w.WriteHeader(status)
		return
	}
	if a.status == 0 {
		a.status = status
	}
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	if !a.passed && a.body.Len()+len(p) > answerLimit {
		a.passed = true
		maps.Copy(a.w.Header(), a.header)
		a.w.WriteHeader(cmp.Or(a.status, http.StatusOK))
		if _, err := a.w.Write(a.body.Bytes()); err != nil {
			return 0, err
		}
	}
	if a.passed {
		return a.w.Write(p)
	}
	return a.body.Write(p)
}

// keepBody reads r's body to send it again if the first leader tried is
// gone; a body over replayLimit is left to be sent once.
func keepBody(r *http.Request) (body []byte, replay bool, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true, nil
	}
	if r.ContentLength > replayLimit {
		return nil, false, nil
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, replayLimit+1))
	if err != nil {
		return nil, false, err
	}
	if len(body) > replayLimit {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		return nil, false, nil
	}
	return body, true, nil
}

// proxyTo sends r to the replica at addr and reports whether the call is
// answered: false when the replica could not be reached or does not lead.
func (rp *replicas) proxyTo(w http.ResponseWriter, r *http.Request, addr string, body []byte, replay bool) bool {
	var failed error
	ctx := r.Context()
	if replay {
		var stop func()
		ctx, stop = rp.whileLeading(ctx, addr)
		defer stop()
	}
	px := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out = pr.Out.WithContext(ctx)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(headerForwarded, rp.proof)
			if replay {
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
				pr.Out.ContentLength = int64(len(body))
			}
		},
		Transport:     rp.client,
		FlushInterval: -1,
		ModifyResponse: func(res *http.Response) error {
			if res.Header.Get(headerNotLeader) != "" {
				res.Body.Close()
				return errNotLeader
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) { failed = err },
	}
	px.ServeHTTP(w, r)
	var dial errDial
	switch {
	case failed == nil:
		return true
	case errors.As(failed, &dial) || errors.Is(failed, errNotLeader):
		rp.log.Info("the leader was not reached; looking for it again", "leader", addr, "err", failed)
		return false
	case r.Context().Err() != nil:
		return true // the client left
	case replay:
		// Its call key makes the next try safe: answered as this one was
		// if it was done, else done there.
		rp.log.Warn("the leader was lost during a forwarded call; sending it to the next", "leader", addr, "method", r.Method, "path", r.URL.Path, "err", failed)
		return false
	}
	rp.log.Warn("the leader was lost during a forwarded call", "leader", addr, "method", r.Method, "path", r.URL.Path, "err", failed)
	httpedge.WriteError(w, sandbox.Wrap(sandbox.KindUnavailable, failed, "the control-plane replica that leads was lost during the call; try again"))
	return true
}

// lostGrace is how long a forwarded call may go on once the Lease has
// passed from the replica serving it: a leader that stepped down lets its
// changes finish (settle) and is killed ~2 s after its signal, so one
// still unanswered after this went with a node that vanished, whose
// connection would hang until TCP gives up on it.
const lostGrace = 3 * time.Second

// whileLeading returns ctx, ended lostGrace after the Lease passes from
// the replica at addr to another (the call is then sent to the next
// leader under its key), and what stops watching.
func (rp *replicas) whileLeading(ctx context.Context, addr string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	changed := rp.lead.Changed()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = rp.lead.Changed()
			if now, self, err := rp.lead.Leader(ctx); err == nil && !self && now == addr {
				continue
			}
			t := time.NewTimer(lostGrace)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
				rp.log.Warn("the replica that led moved on without answering a forwarded call; sending it to the next leader", "leader", addr)
				cancel()
			}
			return
		}
	}()
	return ctx, cancel
}

// serveResume is the leader's internal endpoint: a follower's proxy asks
// it to resume a paused sandbox for the traffic it holds.
func (rp *replicas) serveResume(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !rp.forwarded(r) {
		httpedge.WriteError(w, sandbox.Errorf(sandbox.KindNotFound, "not found"))
		return
	}
	if !rp.leading.Load() {
		rp.notLeader(w)
		return
	}
	if _, err := rp.mgr.Route(r.Context(), strings.TrimPrefix(r.URL.Path, resumePrefix), nil); err != nil {
		httpedge.WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume is a follower's lifecycle.Deps.Resume: it has the leader resume
// a paused sandbox.
func (rp *replicas) resume(ctx context.Context, id string) error {
	var answer error
	err := rp.onLeader(ctx, func(addr string) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+resumePrefix+id, nil)
		if err != nil {
			answer = err
			return true
		}
		req.Header.Set(headerForwarded, rp.proof)
		res, err := rp.client.RoundTrip(req)
		var dial errDial
		if errors.As(err, &dial) {
			return false
		}
		if err != nil {
			answer = sandbox.Wrap(sandbox.KindUnavailable, err, "the control-plane replica that leads was lost while resuming the sandbox")
			return true
		}
		defer res.Body.Close()
		if res.Header.Get(headerNotLeader) != "" {
			return false
		}
		if res.StatusCode != http.StatusNoContent {
			var b httpedge.Body
			_ = json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&b)
			answer = sandbox.Errorf(httpedge.KindOf(res.StatusCode), "%s", b.Message)
		}
		return true
	})
	switch {
	case errors.Is(err, errSelf):
		_, err = rp.mgr.Route(ctx, id, nil)
		return err
	case errors.Is(err, errNoLeader):
		return sandbox.Errorf(sandbox.KindUnavailable, "sandbox '%s' is paused and no control-plane replica leads to resume it; try again", id)
	case err != nil:
		return err
	}
	return answer
}
