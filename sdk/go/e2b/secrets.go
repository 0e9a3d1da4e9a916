package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SecretInfo describes a secret; its value is write-only and never returned.
type SecretInfo struct {
	SecretID  string            `json:"secretID"`
	Name      string            `json:"name"`
	Version   int               `json:"currentVersion"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	UpdatedAt time.Time         `json:"updatedAt"`
}

// SecretListOptions pages ListSecrets.
type SecretListOptions struct {
	Limit     int
	NextToken string
}

// CreateSecret stores a secret, which sandboxes use through ${e2b.secrets.NAME} placeholders
// in their network rules.
func (c *Client) CreateSecret(ctx context.Context, name, value string, metadata map[string]string) (*SecretInfo, error) {
	return c.secretCall(ctx, http.MethodPost, "/secrets", name, map[string]any{"name": name, "value": value, "metadata": metadata})
}

// UpdateSecret replaces a secret's value (and metadata, when given), by ID or name.
func (c *Client) UpdateSecret(ctx context.Context, secret, value string, metadata map[string]string) (*SecretInfo, error) {
	return c.secretCall(ctx, http.MethodPost, "/secrets/"+url.PathEscape(secret), secret, map[string]any{"value": value, "metadata": metadata})
}

// GetSecret describes a secret, by ID or name.
func (c *Client) GetSecret(ctx context.Context, secret string) (*SecretInfo, error) {
	return c.secretCall(ctx, http.MethodGet, "/secrets/"+url.PathEscape(secret), secret, nil)
}

// SecretExists says whether a secret exists.
func (c *Client) SecretExists(ctx context.Context, secret string) (bool, error) {
	_, err := c.GetSecret(ctx, secret)
	var missing *SecretNotFoundError
	if errors.As(err, &missing) {
		return false, nil
	}
	return err == nil, err
}

// DestroySecret deletes a secret; false when there was no such secret.
func (c *Client) DestroySecret(ctx context.Context, secret string) (bool, error) {
	r, err := c.call(ctx, http.MethodDelete, "/secrets/"+url.PathEscape(secret), nil, nil)
	if err != nil {
		return false, err
	}
	if r.status == http.StatusNotFound {
		return false, nil
	}
	return r.ok(), secretError(r, secret)
}

// ListSecrets lists the secrets, page by page.
func (c *Client) ListSecrets(opts SecretListOptions) *Paginator[SecretInfo] {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return &Paginator[SecretInfo]{token: opts.NextToken, next: func(ctx context.Context, token string) ([]SecretInfo, string, error) {
		var out []SecretInfo
		next, err := c.page(ctx, "/secrets", q, token, &out)
		return out, next, err
	}}
}

func (c *Client) secretCall(ctx context.Context, method, path, secret string, body any) (*SecretInfo, error) {
	r, err := c.call(ctx, method, path, nil, body)
	if err != nil {
		return nil, err
	}
	if err := secretError(r, secret); err != nil {
		return nil, err
	}
	var s SecretInfo
	return &s, r.decode(&s)
}

// secretError maps a failed response of the secrets API; nil when r succeeded.
func secretError(r *apiResponse, secret string) error {
	switch {
	case r.ok():
		return nil
	case r.status == http.StatusNotFound:
		return &SecretNotFoundError{SecretError{Message: "Secret " + secret + " not found", StatusCode: r.status}}
	case r.status == http.StatusUnauthorized || r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable:
		return r.err()
	}
	return &SecretError{Message: fmt.Sprintf("%d: %s", r.status, r.message()), StatusCode: r.status}
}
