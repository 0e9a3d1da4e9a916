package jupyter

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
)

// ConnectionInfo is the content of a kernel connection file: where the
// kernel listens and the key that signs its messages.
type ConnectionInfo struct {
	IP              string `json:"ip"`
	Transport       string `json:"transport"`
	SignatureScheme string `json:"signature_scheme"`
	Key             string `json:"key"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	KernelName      string `json:"kernel_name"`
}

// NewConnectionInfo picks five free loopback ports and a random key. The
// ports are free when picked; a kernel started right away gets them unless
// another process races for the same ones, which then fails its start.
func NewConnectionInfo() (ConnectionInfo, error) {
	var ports [5]int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return ConnectionInfo{}, fmt.Errorf("pick a kernel port: %w", err)
		}
		held = append(held, l) // keep it open so the next pick differs
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return ConnectionInfo{
		IP:              "127.0.0.1",
		Transport:       "tcp",
		SignatureScheme: "hmac-sha256",
		Key:             hex.EncodeToString(key),
		ShellPort:       ports[0],
		IOPubPort:       ports[1],
		StdinPort:       ports[2],
		ControlPort:     ports[3],
		HBPort:          ports[4],
	}, nil
}

// WriteFile writes the connection file, readable by uid/gid only (it holds
// the signing key). A negative uid leaves the owner as is.
func (c ConnectionInfo) WriteFile(path string, uid, gid int) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return err
	}
	if uid >= 0 {
		return os.Chown(path, uid, gid)
	}
	return nil
}

func (c ConnectionInfo) endpoint(port int) string {
	return fmt.Sprintf("%s://%s:%d", c.Transport, c.IP, port)
}
