// Command pause is the process of the test cluster's pod sandbox image
// (registry.k8s.io/pause, built locally because no registry is reachable):
// it holds the pod's namespaces open, reaps the zombies of processes that
// end up as its children, and exits when asked to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// As PID 1 of the pod, orphans are re-parented to us: reap every one that has exited.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
