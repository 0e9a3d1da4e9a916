// Command probe runs inside sandboxes in the isolation tests and tries
// what a hostile program would: dial the host and other sandboxes, write
// the agent binary, fork and allocate without end, look for the engine's
// socket. It prints one line of result; the tests judge it.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe dial|greet|serve|write|forkbomb|memhog|sleep|self ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "dial": // dial ADDR: "ok", "refused", "timeout" or another error
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err == nil {
			c.Close()
			fmt.Println("ok")
			return
		}
		fmt.Println(netError(err))
		os.Exit(1)
	case "greet": // greet ADDR NAME: "hello" when a server run by serve answers a request naming NAME
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err == nil {
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			_, err = fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", args[1])
		}
		var line string
		if err == nil {
			line, err = bufio.NewReader(c).ReadString('\n')
		}
		switch {
		case err == nil && line == "hello\n":
			fmt.Println("hello")
			return
		case err == nil:
			fmt.Printf("answered %q\n", line)
		default:
			fmt.Println(netError(err))
		}
		os.Exit(1)
	case "serve": // serve PORT: answer each request with "hello" until killed
		ln, err := net.Listen("tcp", ":"+args[0])
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				continue
			}
			go greet(c)
		}
	case "write": // write PATH: try to change a file every way root may
		f, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write([]byte("#"))
			f.Close()
		}
		fmt.Println("write:", errString(err))
		fmt.Println("chmod:", errString(os.Chmod(args[0], 0o777)))
		fmt.Println("remount:", errString(syscall.Mount("", args[0], "", syscall.MS_REMOUNT|syscall.MS_BIND, "")))
		fmt.Println("unmount:", errString(syscall.Unmount(args[0], syscall.MNT_DETACH)))
	case "forkbomb": // forkbomb MAX: start sleeping children until refused
		max, _ := strconv.Atoi(args[0])
		n := 0
		var err error
		for ; n < max; n++ {
			cmd := exec.Command("/probe", "sleep", "20s")
			if err = cmd.Start(); err != nil {
				break
			}
		}
		fmt.Printf("started %d, last error: %s\n", n, errString(err))
	case "sleep":
		d, _ := time.ParseDuration(args[0])
		time.Sleep(d)
	case "memhog": // memhog MB: allocate and touch MB MiB, reporting progress
		mb, _ := strconv.Atoi(args[0])
		var hold [][]byte
		for i := range mb {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			hold = append(hold, b)
			if i%16 == 0 {
				fmt.Println("allocated MiB:", i)
			}
		}
		fmt.Println("allocated all", len(hold))
	case "self": // self: what this process may do
		status, _ := os.ReadFile("/proc/self/status")
		for l := range strings.Lines(string(status)) {
			for _, k := range []string{"CapEff:", "CapBnd:", "Seccomp:", "NoNewPrivs:"} {
				if strings.HasPrefix(l, k) {
					fmt.Print(l)
				}
			}
		}
		// The kernel's log: the host's under runc (which a sandbox must not
		// read), gVisor's own under runsc.
		klog := make([]byte, 4096)
		if n, err := syscall.Klogctl(3, klog); err != nil { // SYSLOG_ACTION_READ_ALL
			fmt.Println("klog error:", err)
		} else {
			first, _, _ := strings.Cut(string(klog[:n]), "\n")
			fmt.Println("klog:", first)
		}
		var rl syscall.Rlimit
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
		fmt.Printf("nofile: %d %d\n", rl.Cur, rl.Max)
		mounts, _ := os.Open("/proc/self/mountinfo")
		sc := bufio.NewScanner(mounts)
		for sc.Scan() {
			f := strings.Fields(sc.Text()) // field 4 is the mount point
			if len(f) > 4 && (strings.HasSuffix(f[4], ".sock") || strings.Contains(f[4], "docker") || strings.Contains(f[4], "containerd")) {
				fmt.Println("mount:", f[4])
			}
		}
		for _, p := range []string{"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"} {
			if _, err := os.Stat(p); err == nil {
				fmt.Println("socket:", p)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}

// greet answers one request, read to its end so that closing sends no
// reset, with "hello".
func greet(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(c)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if strings.TrimSpace(l) == "" {
			break
		}
	}
	c.Write([]byte("hello\n"))
}

// netError is "refused", "timeout" or "error: ..." for a failed dial,
// read or write.
func netError(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case os.IsTimeout(err):
		return "timeout"
	}
	return "error: " + err.Error()
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
