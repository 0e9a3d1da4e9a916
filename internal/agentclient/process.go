package agentclient

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/proto/process"
	"github.com/warrenhq/warren/proto/process/processconnect"
)

// Commands run the way the SDK runs them: a login bash, so that the
// profile's PATH applies.
const shell = "/bin/bash"

// maxOutput bounds what RunCommand keeps of a command's output.
const maxOutput = 4096

func (c *Client) process(addr string) processconnect.ProcessClient {
	return processconnect.NewProcessClient(c.http, "http://"+addr)
}

func commandRequest(accessToken, user, workdir, cmd string, env map[string]string) *connect.Request[process.StartRequest] {
	cfg := &process.ProcessConfig{Cmd: shell, Args: []string{"-l", "-c", cmd}, Envs: env}
	if workdir != "" {
		cfg.Cwd = &workdir
	}
	req := connect.NewRequest(&process.StartRequest{Process: cfg})
	setAuth(req.Header(), accessToken, user)
	return req
}

// setAuth gives a request to the agent the sandbox's access token and
// the user it runs as.
func setAuth(h http.Header, accessToken, user string) {
	if accessToken != "" {
		h.Set("X-Access-Token", accessToken)
	}
	if name, _, _ := strings.Cut(user, ":"); name != "" {
		// The agent takes the user from Basic auth, with no password.
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":")))
	}
}

// StartCommand starts cmd in the sandbox whose agent is at addr, as user in
// workdir with env, and returns once it runs; it keeps running after.
func (c *Client) StartCommand(ctx context.Context, addr, accessToken, user, workdir, cmd string, env map[string]string) error {
	// No deadline reaches the agent: a process keeps the deadline of the
	// request that started it.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	stream, err := c.process(addr).Start(sctx, commandRequest(accessToken, user, workdir, cmd, env))
	if err != nil {
		return commandError(err)
	}
	defer stream.Close()
	for stream.Receive() {
		if stream.Msg().GetEvent().GetStart() != nil {
			return nil
		}
	}
	if err := stream.Err(); err != nil {
		return commandError(err)
	}
	return sandbox.Errorf(sandbox.KindInternal, "the agent ended the command before starting it")
}

// RunCommand runs cmd to its end and returns its exit code and the last
// few KiB of its output.
func (c *Client) RunCommand(ctx context.Context, addr, accessToken, user, workdir, cmd string, env map[string]string) (int, string, error) {
	stream, err := c.process(addr).Start(ctx, commandRequest(accessToken, user, workdir, cmd, env))
	if err != nil {
		return 0, "", commandError(err)
	}
	defer stream.Close()
	var out []byte
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			out = append(out, d.GetStdout()...)
			out = append(out, d.GetStderr()...)
			if len(out) > maxOutput {
				out = out[len(out)-maxOutput:]
			}
		}
		if end := ev.GetEnd(); end != nil {
			return int(end.GetExitCode()), string(out), nil
		}
	}
	if err := stream.Err(); err != nil {
		return 0, string(out), commandError(err)
	}
	return 0, string(out), sandbox.Errorf(sandbox.KindInternal, "the command's stream ended without an exit code")
}

func commandError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return sandbox.Wrap(sandbox.KindInternal, err, "agent refused the command: "+ce.Message())
	}
	return sandbox.Wrap(sandbox.KindUnavailable, err, "agent is not reachable")
}
