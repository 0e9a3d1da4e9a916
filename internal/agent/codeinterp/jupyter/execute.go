package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ExecuteRequest is the content of an execute_request.
type ExecuteRequest struct {
	Code            string         `json:"code"`
	Silent          bool           `json:"silent"`
	StoreHistory    bool           `json:"store_history"`
	UserExpressions map[string]any `json:"user_expressions"`
	AllowStdin      bool           `json:"allow_stdin"`
	StopOnError     bool           `json:"stop_on_error"`
}

// ExecuteReply is the content of an execute_reply.
type ExecuteReply struct {
	Status         string   `json:"status"` // ok, error or aborted
	ExecutionCount int      `json:"execution_count"`
	EName          string   `json:"ename"`
	EValue         string   `json:"evalue"`
	Traceback      []string `json:"traceback"`
}

// Execute runs code and hands every iopub message about it (stream,
// display_data, execute_result, error, execute_input, ...) to onOutput, in
// order. It returns the reply once the kernel has both replied and gone
// idle, so no output of this execution can arrive later. When ctx ends
// first it returns ctx's error; the kernel may still be running the code.
func (c *Client) Execute(ctx context.Context, req ExecuteRequest, onOutput func(*Message)) (*ExecuteReply, error) {
	if req.UserExpressions == nil {
		req.UserExpressions = map[string]any{}
	}
	r, err := c.Send("execute_request", req)
	if err != nil {
		return nil, err
	}
	defer r.Stop()
	var reply *ExecuteReply
	idle := false
	for reply == nil || !idle {
		m, err := r.Next(ctx)
		if err != nil {
			return nil, err
		}
		switch m.Header.MsgType {
		case "execute_reply":
			reply = &ExecuteReply{}
			if err := json.Unmarshal(m.Content, reply); err != nil {
				return nil, fmt.Errorf("jupyter: decode execute_reply: %w", err)
			}
		case "status":
			idle = isIdle(m)
		default:
			onOutput(m)
		}
	}
	return reply, nil
}

// WaitReady asks for kernel_info until the kernel answers on shell and its
// iopub broadcasts reach us: a SUB socket misses whatever is published
// before its subscription lands, so only then is it safe to execute.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		err := c.probe(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if err != context.DeadlineExceeded {
			return err
		}
	}
}

func (c *Client) probe(ctx context.Context) error {
	r, err := c.Send("kernel_info_request", struct{}{})
	if err != nil {
		return err
	}
	defer r.Stop()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	replied, broadcast := false, false
	for !replied || !broadcast {
		m, err := r.Next(ctx)
		if err != nil {
			return err
		}
		switch m.Header.MsgType {
		case "kernel_info_reply":
			replied = true
		case "status":
			broadcast = broadcast || isIdle(m)
		}
	}
	return nil
}

func isIdle(m *Message) bool {
	var st struct {
		ExecutionState string `json:"execution_state"`
	}
	return json.Unmarshal(m.Content, &st) == nil && st.ExecutionState == "idle"
}
