package main

import (
	"context"

	"github.com/warrenhq/warren/internal/localpath"
	"github.com/warrenhq/warren/internal/runtime/kubernetes"
)

const localPathUsage = `Usage: warren local-path [flags]

Run a node's local-path provisioner (the DaemonSet of
scripts/kube/local-path-provisioner.yaml): for every PersistentVolumeClaim
of a StorageClass of --provisioner placed on this node, make a directory under
--dir and a hostPath PersistentVolume of it, pinned to the node; delete both
once the claim is deleted. Its volumes are ReadWriteOnce. A class with the
parameter enforceSize: "true" gets, for each volume, an ext4 filesystem of the
claim's size loop-mounted on its directory (root, loop devices, and --dir on a
shared mount that reaches the node); other classes' sizes are not enforced.
A class with the parameter shared: "true" gets ReadWriteMany volumes, each a
directory of the shared filesystem that every node mounts at --shared-host-dir
(MooseFS, scripts/kube/moosefs.yaml), pinned to no node.
Warren's node agent serves their content from the same directories.`

func (m *Main) runLocalPath(ctx context.Context, args []string) error {
	fs := m.newFlagSet("local-path", "warren local-path [flags]", localPathUsage)
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var cfg localpath.Config
	var kubeconfig string
	e.String(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: the cluster this runs in, from its service account)")
	e.String(&cfg.Node, "node-name", "", "this node's name (the DaemonSet gives spec.nodeName)")
	e.String(&cfg.Dir, "dir", "", "this node's volumes directory, as mounted into the provisioner")
	e.String(&cfg.HostDir, "host-dir", "", "the same directory on the node (the volumes' hostPath)")
	e.String(&cfg.SharedDir, "shared-dir", "", "the shared filesystem's mount, as mounted into the provisioner (\"\": none, claims of a shared class fail)")
	e.String(&cfg.SharedHostDir, "shared-host-dir", "", "the same directory on every node (the shared volumes' hostPath)")
	e.String(&cfg.Name, "provisioner", localpath.DefaultName, "the provisioner's name, which its StorageClass names")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	if cfg.Node == "" || cfg.Dir == "" || cfg.HostDir == "" {
		return usageError{"--node-name, --dir and --host-dir are required"}
	}
	if (cfg.SharedDir == "") != (cfg.SharedHostDir == "") {
		return usageError{"--shared-dir and --shared-host-dir go together"}
	}
	cli, err := kubernetes.ClientFromKubeconfig(kubeconfig)
	if err != nil {
		return err
	}
	cfg.Client, cfg.Logger = cli, m.logger("json")
	p, err := localpath.New(cfg)
	if err != nil {
		return err
	}
	cfg.Logger.Info("local-path provisioner running", "node", cfg.Node, "dir", cfg.HostDir, "provisioner", cfg.Name)
	return p.Run(ctx)
}
