package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// maxPeek bounds what is read of a connection before deciding on it.
const maxPeek = 16 << 10

// tlsHandshake is the content type that starts a TLS client's stream.
const tlsHandshake = 0x16

var (
	errNoName  = errors.New("neither a TLS client hello with a server name nor an HTTP request with a Host")
	errSniffed = errors.New("sniffed")
)

// sniff reads the start of a client's stream and returns the host name it
// is for: the server name of a TLS client hello, or the Host of an HTTP
// request (without its port). It reads at most about maxPeek bytes.
func sniff(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxPeek), maxPeek)
	first, err := br.Peek(1)
	if err != nil {
		return "", errNoName
	}
	var name string
	switch {
	case first[0] == tlsHandshake:
		name, err = serverName(br)
	case first[0] >= 'A' && first[0] <= 'Z': // an HTTP method
		name, err = httpHost(br)
	default:
		return "", errNoName
	}
	if err != nil || name == "" {
		return "", errNoName
	}
	return strings.ToLower(strings.TrimSuffix(name, ".")), nil
}

// serverName runs the server side of a TLS handshake on r just far enough
// to read the client hello, and returns its server name.
func serverName(r io.Reader) (string, error) {
	var name string
	conf := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errSniffed
	}}
	err := tls.Server(readOnlyConn{r}, conf).HandshakeContext(context.Background())
	if name == "" {
		return "", errors.Join(errNoName, err)
	}
	return name, nil
}

// httpHost reads an HTTP request's head from r and returns its host.
func httpHost(r *bufio.Reader) (string, error) {
	req, err := http.ReadRequest(r)
	if err != nil {
		return "", err
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host, nil
}

// readOnlyConn is a net.Conn that reads from r and refuses writes: enough
// for crypto/tls to parse a client hello without answering it.
type readOnlyConn struct{ r io.Reader }

func (c readOnlyConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnlyConn) Write([]byte) (int, error)        { return 0, errSniffed }
func (readOnlyConn) Close() error                     { return nil }
func (readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
