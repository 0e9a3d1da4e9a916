// Command serve runs the code-interpreter server alone, the way the agent
// does with -code-interpreter; the container test runs it in the image.
package main

import (
	"flag"
	"log/slog"
	"net/http"
	"os"

	"github.com/warrenhq/warren/internal/agent/codeinterp"
)

func main() {
	addr := flag.String("addr", ":49999", "listen address")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := codeinterp.New(codeinterp.Config{
		Workdir:      "/home/user", // as the agent sets it
		Prestart:     []string{"python", "javascript"},
		TrafficToken: os.Getenv("TRAFFIC_TOKEN"),
		Logger:       log,
	})
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	defer srv.Close()
	log.Error("serve", "err", http.ListenAndServe(*addr, srv))
}
