package events

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Webhook targets are chosen by any API-key holder, and the server posts
// from inside the operator's network: left open, a webhook would map and
// reach the server's loopback and private services (blindly, but with
// the delivery log telling open from closed ports). Unless the operator
// allows private targets, a URL whose address is on loopback, link-local,
// a private or shared range, or one of this host's own addresses is
// refused when it is set and again at every connection, on the address
// actually dialled (a name may resolve elsewhere the second time).

// sharedSpace is RFC 6598's carrier-grade NAT range, private in practice.
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

// forbiddenRule names why a is no target, "" if it is one.
func forbiddenRule(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified() || (a.Is4() && a.As4()[0] == 0):
		return "unspecified (this host)"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsPrivate() || sharedSpace.Contains(a):
		return "private"
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "multicast or broadcast"
	case isOwnAddr(a):
		return "this server's own"
	}
	return ""
}

// isOwnAddr reports whether a is an address of one of this host's
// interfaces (a public one too: the server's own services listen there).
func isOwnAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: refuse
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if la, ok := netip.AddrFromSlice(n.IP); ok && la.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// errForbidden is a dial refused by the target rule.
type errForbidden struct{ rule string }

func (e errForbidden) Error() string { return "the receiver's address is " + e.rule }

// allowPrivateHint is what every refusal tells the client.
const allowPrivateHint = "webhooks may not target loopback, link-local, private or this server's own addresses " +
	"(the operator allows them with warren serve --webhook-allow-private)"

// lookupTimeout bounds the resolution of a webhook's host when it is set.
const lookupTimeout = 5 * time.Second

// checkTarget refuses a URL whose host is, or resolves to, a forbidden
// address. A name that does not resolve now is accepted: every delivery
// checks what it resolves to then.
func checkTarget(ctx context.Context, u *url.URL) error {
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if rule := forbiddenRule(a); rule != "" {
			return sandbox.Errorf(sandbox.KindInvalid, "url's host %s is a %s address: %s", host, rule, allowPrivateHint)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		// The resolved address is not echoed: it may describe the
		// server's own network.
		if rule := forbiddenRule(a); rule != "" {
			return sandbox.Errorf(sandbox.KindInvalid, "url's host %s resolves to a %s address: %s", host, rule, allowPrivateHint)
		}
	}
	return nil
}

// dialControl is a net.Dialer's Control that refuses forbidden
// addresses: it sees the address each connection is about to be made
// to, after resolution.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errForbidden{rule: "not an IP address"}
	}
	if rule := forbiddenRule(ap.Addr()); rule != "" {
		return errForbidden{rule: "a " + rule + " address: " + allowPrivateHint}
	}
	return nil
}

// classify turns a failed attempt's error into what the delivery log
// shows: a reason, never the raw dial error (which names addresses of
// the server's networks).
func classify(err error) string {
	var forbidden errForbidden
	var dnsErr *net.DNSError
	var tlsRecord tls.RecordHeaderError
	var tlsAlert tls.AlertError
	var tlsVerify *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &forbidden):
		return "refused: " + forbidden.Error()
	case errors.As(err, &dnsErr):
		return "the receiver's host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout"
	case errors.As(err, &tlsRecord) || errors.As(err, &tlsAlert) || errors.As(err, &tlsVerify) ||
		errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid):
		return "TLS error"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without an answer"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "receiver unreachable"
	}
	return "connection failed"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
