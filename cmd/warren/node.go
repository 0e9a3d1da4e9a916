package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/nodeagent"
)

const nodeUsage = `Usage: warren node [flags]
       warren node install-agent DEST
       warren node isolate [flags]

Run Warren's node agent: on each node of a Kubernetes cluster (the warren-node
DaemonSet of deploy/kubernetes/), it does for warren serve --engine kubernetes
what the Kubernetes API cannot: freeze and thaw a sandbox pod's cgroup, cap its
processes, sample its CPU and memory; import, export, list and remove the node's
images in its containerd (namespace k8s.io) and commit a pod's container to an
image; with --node-ip (in the node's network namespace, with NET_ADMIN), enforce
the egress settings of the node's sandbox pods with an egress gateway on that
address and an nftables table of its own; with --volume-dir, serve the content
of the node's local-path volumes (the directories warren local-path makes
there) to the control plane's volume content API, and with --shared-volume-dir
that of the ReadWriteMany volumes of the shared filesystem mounted there. It serves HTTPS with a key derived from
the token; every call but /healthz needs the token (WARREN_NODE_TOKEN, from the
warren-node-token Secret): access to containerd's socket is root on the node.

install-agent copies the warren-agent binary that lies beside this one to DEST
(the init container of pods of servers before isolate ran it).
isolate programs a sandbox pod's network namespace and then delivers the agent
(every sandbox pod's init container runs it).`

func (m *Main) runNode(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "isolate" {
		return m.runIsolate(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "install-agent" {
		if len(args) != 2 {
			return usageError{"node install-agent takes one argument: the destination path"}
		}
		return installAgent(args[1])
	}
	fs := m.newFlagSet("node", "warren node [flags]", nodeUsage)
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var addr, root, tokenFile, socket, snapshotter, nodeName, nodeIP, volumeDir, sharedDir string
	e.String(&addr, "node-addr", "", "address the node agent listens on (default: --node-ip, else every address, at port "+strconv.Itoa(nodeagent.Port)+")")
	e.String(&nodeName, "node-name", "", "the node's name (the DaemonSet gives spec.nodeName); names its egress table")
	e.String(&nodeIP, "node-ip", "", "the node's address, which the node agent shares (hostNetwork): its egress gateway listens there and sandbox pods with egress settings are sent to it (\"\": no egress enforcement)")
	e.String(&root, "cgroup-root", "/sys/fs/cgroup", "the host's cgroup filesystem, as mounted into the node agent")
	e.String(&tokenFile, "node-token-file", "", "file holding the token callers must present (else env WARREN_NODE_TOKEN)")
	e.String(&socket, "containerd-socket", "/run/containerd/containerd.sock", "the node's containerd socket, as mounted into the node agent (\"\": no image API)")
	e.String(&snapshotter, "snapshotter", "overlayfs", "the containerd snapshotter the kubelet's pods use")
	e.String(&volumeDir, "volume-dir", "", "this node's local-path volumes directory, as mounted into the node agent (the --dir of warren local-path): its volumes' content is served to the control plane (\"\": none)")
	e.String(&sharedDir, "shared-volume-dir", "", "the shared filesystem's mount, as mounted into the node agent (the --shared-dir of warren local-path): the ReadWriteMany volumes' content is served to the control plane (\"\": none)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	token := strings.TrimSpace(m.Getenv("WARREN_NODE_TOKEN"))
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return fmt.Errorf("--node-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	cg, err := nodeagent.NewCgroups(root)
	if err != nil {
		return err
	}
	log := m.logger("json")
	srv, err := nodeagent.NewServer(cg, token, log)
	if err != nil {
		return err
	}
	if socket != "" {
		images, err := nodeagent.NewContainerd(ctx, socket, snapshotter)
		if err != nil {
			return fmt.Errorf("--containerd-socket: %w", err)
		}
		defer images.Close()
		srv.ServeImages(images)
	}
	if volumeDir != "" {
		srv.ServeVolumes(volumeDir)
	}
	if sharedDir != "" {
		srv.ServeSharedVolumes(sharedDir)
	}
	if nodeIP != "" {
		ip, err := netip.ParseAddr(nodeIP)
		if err != nil || nodeName == "" {
			return usageError{"--node-ip wants the node's IPv4 address, and --node-name its name"}
		}
		eg, err := nodeagent.NewEgress(ip, nodeName, log)
		if err != nil {
			return fmt.Errorf("egress gateway: %w", err)
		}
		defer eg.Close()
		srv.ServeEgress(eg)
		log.Info("egress gateway listening", "addr", ip, "gateway", nodeagent.GatewayPort, "dns", nodeagent.DNSPort, "table", nodeagent.TableName(nodeName))
		if addr == "" {
			addr = net.JoinHostPort(nodeIP, strconv.Itoa(nodeagent.Port))
		}
	}
	if addr == "" {
		addr = ":" + strconv.Itoa(nodeagent.Port)
	}
	tlsCfg, err := nodeagent.ServerTLS(token)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 5 * time.Minute}
	log.Info("node agent listening (HTTPS)", "addr", ln.Addr().String(), "cgroup_root", root, "containerd", socket)
	errc := make(chan error, 1)
	go func() { errc <- hs.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}

// installAgent copies warren-agent from beside this executable to dest,
// executable by everyone, through a temporary file so that dest is never
// seen half-written.
func installAgent(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(filepath.Join(filepath.Dir(self), "warren-agent"))
	if err != nil {
		return fmt.Errorf("the agent image holds no warren-agent beside %s: %w", self, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".warren-agent-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, in)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Close())
	if err != nil {
		return fmt.Errorf("copying the agent to %s: %w", dest, err)
	}
	return os.Rename(tmp.Name(), dest)
}
