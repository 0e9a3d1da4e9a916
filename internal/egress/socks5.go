package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS5 (RFC 1928) with username/password authentication (RFC 1929): the
// client side the gateway opens a sandbox's upstream connections with when
// it has an egress proxy. Only CONNECT, to the IP address the sandbox was
// going to: the sandbox's name was checked (or resolved) here, so the
// proxy must not pick another address for it.

const (
	socksVersion   = 5
	socksNoAuth    = 0x00
	socksUserPass  = 0x02
	socksNoMethods = 0xff
	socksConnect   = 0x01
	socksIPv4      = 0x01
	socksDomain    = 0x03
	socksIPv6      = 0x04
	authVersion    = 0x01
)

// socksReplies are the REP codes of RFC 1928 section 6.
var socksReplies = map[byte]string{
	1: "general SOCKS server failure",
	2: "connection not allowed by ruleset",
	3: "network unreachable",
	4: "host unreachable",
	5: "connection refused",
	6: "TTL expired",
	7: "command not supported",
	8: "address type not supported",
}

// dialSOCKS5 connects to dst through the SOCKS5 proxy at proxy (host:port,
// a host name resolved now), authenticating with user and pass when
// either is set. Any failure is an error: never a direct connection.
func dialSOCKS5(ctx context.Context, proxy, user, pass string, dst netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s: %w", proxy, err)
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	err = socksHandshake(c, user, pass, dst)
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("egress proxy %s: %w", proxy, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// socksHandshake runs the client side of a SOCKS5 CONNECT to dst on rw.
func socksHandshake(rw io.ReadWriter, user, pass string, dst netip.AddrPort) error {
	method := byte(socksNoAuth)
	if user != "" || pass != "" {
		// Credentials were given for this proxy: offer nothing else, so a
		// proxy that would take anyone is not taken as authenticating.
		if len(user) > 255 || len(pass) > 255 {
			return errors.New("username and password are at most 255 bytes")
		}
		method = socksUserPass
	}
	if _, err := rw.Write([]byte{socksVersion, 1, method}); err != nil {
		return err
	}
	var choice [2]byte
	if _, err := io.ReadFull(rw, choice[:]); err != nil {
		return fmt.Errorf("no SOCKS5 greeting: %w", err)
	}
	switch {
	case choice[0] != socksVersion:
		return fmt.Errorf("not a SOCKS5 proxy (version byte %d)", choice[0])
	case choice[1] == socksNoMethods && method == socksUserPass:
		return errors.New("the proxy does not take a username and password")
	case choice[1] == socksNoMethods:
		return errors.New("the proxy wants credentials: set network.egressProxy.username and password")
	case choice[1] != method:
		return fmt.Errorf("the proxy chose authentication method %d, which was not offered", choice[1])
	}
	if method == socksUserPass {
		msg := make([]byte, 0, 3+len(user)+len(pass))
		msg = append(msg, authVersion, byte(len(user)))
		msg = append(msg, user...)
		msg = append(msg, byte(len(pass)))
		msg = append(msg, pass...)
		if _, err := rw.Write(msg); err != nil {
			return err
		}
		var status [2]byte
		if _, err := io.ReadFull(rw, status[:]); err != nil {
			return fmt.Errorf("no answer to the credentials: %w", err)
		}
		if status[1] != 0 {
			return errors.New("the proxy refused the username and password")
		}
	}
	a := dst.Addr().Unmap()
	req := []byte{socksVersion, socksConnect, 0}
	if a.Is4() {
		b := a.As4()
		req = append(append(req, socksIPv4), b[:]...)
	} else {
		b := a.As16()
		req = append(append(req, socksIPv6), b[:]...)
	}
	req = append(req, byte(dst.Port()>>8), byte(dst.Port()))
	if _, err := rw.Write(req); err != nil {
		return err
	}
	return readSOCKSReply(rw)
}

// readSOCKSReply reads the proxy's reply to CONNECT, bound address and
// all, so that what follows is the destination's stream.
func readSOCKSReply(r io.Reader) error {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return fmt.Errorf("no reply to CONNECT: %w", err)
	}
	if head[0] != socksVersion {
		return fmt.Errorf("not a SOCKS5 reply (version byte %d)", head[0])
	}
	if head[1] != 0 {
		why, ok := socksReplies[head[1]]
		if !ok {
			why = fmt.Sprintf("reply code %d", head[1])
		}
		return fmt.Errorf("the proxy could not connect: %s", why)
	}
	var n int
	switch head[3] {
	case socksIPv4:
		n = 4
	case socksIPv6:
		n = 16
	case socksDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return fmt.Errorf("truncated CONNECT reply: %w", err)
		}
		n = int(l[0])
	default:
		return fmt.Errorf("CONNECT reply with address type %d", head[3])
	}
	if _, err := io.ReadFull(r, make([]byte, n+2)); err != nil {
		return fmt.Errorf("truncated CONNECT reply: %w", err)
	}
	return nil
}
