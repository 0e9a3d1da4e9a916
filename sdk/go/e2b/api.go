package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// Version is this SDK's version, sent in the User-Agent.
const Version = "0.1.0"

var userAgent = "e2b-go-sdk/" + Version

// Client talks to an E2B-compatible control plane and, through the sandboxes it returns, to
// the agents inside them. It is safe for concurrent use.
type Client struct {
	cfg Config
}

// Config returns the resolved configuration of the client.
func (c *Client) Config() Config { return c.cfg }

// apiResponse is a control-plane response read in full.
type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

// apiErrorBody is the JSON body of every error of the control plane; code repeats the status.
type apiErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (r *apiResponse) ok() bool { return r.status >= 200 && r.status < 300 }

// code is the code of an error body (which some calls branch on, as the official SDKs do), the
// HTTP status when the body has none.
func (r *apiResponse) code() int {
	var b apiErrorBody
	if json.Unmarshal(r.body, &b) == nil && b.Code != 0 {
		return b.Code
	}
	return r.status
}

func (r *apiResponse) message() string {
	var b apiErrorBody
	if json.Unmarshal(r.body, &b) == nil && b.Message != "" {
		return b.Message
	}
	if len(r.body) > 0 {
		return string(r.body)
	}
	return http.StatusText(r.status)
}

func (r *apiResponse) decode(out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		return &SandboxError{Message: "decoding the response: " + err.Error(), StatusCode: r.status, Err: err}
	}
	return nil
}

// err maps a failed response to the error classes as the official SDKs do.
func (r *apiResponse) err() error {
	return errorFromCode(r.status, r.message())
}

func errorFromCode(code int, msg string) error {
	switch code {
	case http.StatusUnauthorized:
		return &AuthenticationError{Message: "Unauthorized, please check your credentials. - " + msg}
	case http.StatusTooManyRequests:
		return &RateLimitError{sandboxErr(code, "Rate limit exceeded, please try again later - "+msg, nil)}
	case http.StatusServiceUnavailable:
		return &ServiceBusyError{Message: "Service temporarily unavailable, please retry - " + msg}
	}
	return &SandboxError{Message: fmt.Sprintf("%d: %s", code, msg), StatusCode: code}
}

// call sends one control-plane request, retrying as the official SDKs do, and reads the whole
// response. The error is for requests that got no response; a response of any status is
// returned for the caller to judge.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in any) (*apiResponse, error) {
	if c.cfg.APIKey == "" && c.cfg.AccessToken == "" {
		return nil, &AuthenticationError{Message: "API key is required, please visit the Team tab at https://e2b.dev/dashboard to get your API key. You can either set the environment variable `E2B_API_KEY` or pass it with WithAPIKey"}
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, &InvalidArgumentError{sandboxErr(0, "encoding the request: "+err.Error(), err)}
		}
	}
	ctx, cancel := withTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	u := c.cfg.APIURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, &InvalidArgumentError{sandboxErr(0, err.Error(), err)}
		}
		c.setAPIHeaders(req.Header, body != nil)
		res, err := c.cfg.HTTPClient.Do(req)
		if err != nil {
			if attempt < c.cfg.Retries && idempotent(method) && connectionBroke(err) {
				if werr := sleepCtx(ctx, backoff(attempt)); werr == nil {
					continue
				}
			}
			return nil, transportError(ctx, err)
		}
		r, err := readResponse(res)
		if err != nil {
			return nil, transportError(ctx, err)
		}
		if delay, ok := retryAfter(r); ok && attempt < c.cfg.Retries && fitsDeadline(ctx, delay) {
			if err := sleepCtx(ctx, delay); err != nil {
				return nil, transportError(ctx, err)
			}
			continue
		}
		return r, nil
	}
}

func (c *Client) setAPIHeaders(h http.Header, jsonBody bool) {
	for k, vs := range c.cfg.Headers {
		h[k] = append([]string(nil), vs...)
	}
	if c.cfg.APIKey != "" {
		h.Set("X-API-KEY", c.cfg.APIKey)
	}
	if c.cfg.AccessToken != "" {
		h.Set("Authorization", "Bearer "+c.cfg.AccessToken)
	}
	h.Set("User-Agent", userAgent)
	if jsonBody {
		h.Set("Content-Type", "application/json")
	}
}

func readResponse(res *http.Response) (*apiResponse, error) {
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &apiResponse{status: res.StatusCode, header: res.Header, body: b}, nil
}

var digits = regexp.MustCompile(`^\d+$`)

// retryAfter says how long to wait before trying a 429 or 503 again: only a Retry-After of
// whole seconds is honoured (as by the official SDKs; an HTTP date is not).
func retryAfter(r *apiResponse) (time.Duration, bool) {
	if r.status != http.StatusTooManyRequests && r.status != http.StatusServiceUnavailable {
		return 0, false
	}
	v := r.header.Get("Retry-After")
	if !digits.MatchString(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > 2147483 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

func fitsDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Now().Add(d).Before(dl)
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return false
}

// connectionBroke says whether err is a connection reset or closed before the response: a
// request that may be sent again when it is idempotent.
func connectionBroke(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func backoff(attempt int) time.Duration {
	return time.Duration(100<<attempt) * time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// transportError wraps an error of a request that got no response: a TimeoutError when its
// time ran out, a SandboxError otherwise. Both unwrap to the cause (context.Canceled, say).
func transportError(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{sandboxErr(0, "Request timed out — the request took too long, consider raising the request timeout: "+err.Error(), err)}
	}
	return &SandboxError{Message: err.Error(), Err: err}
}

// withTimeout bounds ctx by d when d is positive.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

func itoa(n int) string { return strconv.Itoa(n) }

// seconds converts a duration to whole seconds, rounding up as the official SDKs do.
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
