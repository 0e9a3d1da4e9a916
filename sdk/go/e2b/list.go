package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ListOptions filters and pages List.
type ListOptions struct {
	// Metadata keeps the sandboxes whose metadata has all these pairs.
	Metadata map[string]string
	// States keeps the sandboxes in these states; default running and paused.
	States []SandboxState
	// StartedAfter keeps the sandboxes started after this time; zero: no bound.
	StartedAfter time.Time
	// Template keeps the sandboxes of this template.
	Template string
	// Order is "asc" or "desc" by start time; "" leaves the server's order.
	Order string
	// Limit is the page size; 0 leaves the server's (100).
	Limit int
	// NextToken starts at the page it names (from Paginator.NextToken).
	NextToken string
}

// Paginator pages through a listing. It is not safe for concurrent use.
type Paginator[T any] struct {
	next      func(ctx context.Context, token string) ([]T, string, error)
	token     string
	exhausted bool
}

// HasNext says whether another page may follow.
func (p *Paginator[T]) HasNext() bool { return !p.exhausted }

// NextToken names the next page ("" when there is none).
func (p *Paginator[T]) NextToken() string { return p.token }

// NextItems fetches the next page.
func (p *Paginator[T]) NextItems(ctx context.Context) ([]T, error) {
	if p.exhausted {
		return nil, &SandboxError{Message: "No more items to fetch"}
	}
	items, token, err := p.next(ctx, p.token)
	if err != nil {
		return nil, err
	}
	p.token, p.exhausted = token, token == ""
	return items, nil
}

// All fetches every remaining page.
func (p *Paginator[T]) All(ctx context.Context) ([]T, error) {
	var all []T
	for p.HasNext() {
		items, err := p.NextItems(ctx)
		if err != nil {
			return all, err
		}
		all = append(all, items...)
	}
	return all, nil
}

// List lists the sandboxes, page by page.
func (c *Client) List(opts ListOptions) *Paginator[SandboxInfo] {
	q := url.Values{}
	if len(opts.Metadata) > 0 {
		q.Set("metadata", encodeMetadata(opts.Metadata))
	}
	if len(opts.States) > 0 {
		s := make([]string, len(opts.States))
		for i, st := range opts.States {
			s[i] = string(st)
		}
		q.Set("state", strings.Join(s, ","))
	}
	if !opts.StartedAfter.IsZero() {
		q.Set("startedAfter", opts.StartedAfter.UTC().Format(time.RFC3339Nano))
	}
	if opts.Template != "" {
		q.Set("template", opts.Template)
	}
	if opts.Order != "" {
		q.Set("order", opts.Order)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return &Paginator[SandboxInfo]{token: opts.NextToken, next: func(ctx context.Context, token string) ([]SandboxInfo, string, error) {
		var out []SandboxInfo
		next, err := c.page(ctx, "/v2/sandboxes", q, token, &out)
		return out, next, err
	}}
}

// page fetches one page of a listing into out and returns the token of the next one.
func (c *Client) page(ctx context.Context, path string, query url.Values, token string, out any) (string, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	if token != "" {
		q.Set("nextToken", token)
	}
	r, err := c.call(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return "", err
	}
	if !r.ok() {
		return "", r.err()
	}
	return r.header.Get("X-Next-Token"), r.decode(out)
}

// encodeMetadata encodes a metadata filter as the official SDKs do: key=value pairs, each
// part escaped, joined by & (then escaped once more as a query value).
func encodeMetadata(m map[string]string) string {
	pairs := url.Values{}
	for k := range m {
		pairs.Set(escapeComponent(k), escapeComponent(m[k]))
	}
	return pairs.Encode()
}

// escapeComponent escapes s as JavaScript's encodeURIComponent does.
func escapeComponent(s string) string {
	const keep = "-_.!~*'()"
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
