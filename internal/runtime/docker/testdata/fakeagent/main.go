// Command fakeagent stands in for warren-agent in the Docker runtime's
// tests: it serves /health on the agent port and reports what the runtime
// set up for it (user, hostname, secret).
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		fmt.Fprintf(w, "uid=%d host=%s secret=%s pid=%d args=%q", os.Getuid(), host, os.Getenv("WARREN_AGENT_SECRET"), os.Getpid(), os.Args[1:])
	})
	mux.HandleFunc("POST /log/{stream}", func(w http.ResponseWriter, r *http.Request) {
		out := os.Stdout
		if r.PathValue("stream") == "stderr" {
			out = os.Stderr
		}
		io.Copy(out, r.Body) // the container's log, read by Runtime.Logs
		w.WriteHeader(http.StatusNoContent)
	})
	if err := http.ListenAndServe(":49983", mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
