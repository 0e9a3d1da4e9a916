package secrets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/warrenhq/warren/internal/sandbox"
)

// UnresolvedError is a placeholder that does not resolve for a sandbox:
// the request that needs it must not be sent. Its message names the
// placeholder and why, never a value, so the gateway may show it to the
// sandbox.
type UnresolvedError struct {
	Placeholder string // the placeholder as written; "" when the value did not parse
	Reason      string
}

func (e *UnresolvedError) Error() string {
	if e.Placeholder == "" {
		return "header value does not resolve: " + e.Reason
	}
	return fmt.Sprintf("placeholder %s does not resolve: %s", e.Placeholder, e.Reason)
}

// Expand returns value with its placeholders resolved for sandbox
// sandboxID of team teamID: ${e2b.secrets.NAME} to the current value of
// the team's secret NAME, ${e2b.identity.tokens.NAME} to a token newly
// minted for the sandbox from its iam.tokens[NAME]. A value without
// placeholders comes back as it is. What does not resolve, and a result
// that is no valid header value, is an *UnresolvedError; any other error
// (the store's, the minter's, a sealed value this server's key cannot
// open) is the operator's, to log and not to show.
func (s *Service) Expand(ctx context.Context, sandboxID, teamID, value string) (string, error) {
	var sb *sandbox.Sandbox // read once, at the first token placeholder
	out, err := sandbox.ExpandPlaceholders(value, func(p sandbox.Placeholder) (string, error) {
		switch p.Kind {
		case sandbox.PlaceholderSecret:
			return s.secretValue(ctx, teamID, p)
		default:
			if sb == nil {
				got, err := s.workload(ctx, sandboxID, teamID, p)
				if err != nil {
					return "", err
				}
				sb = &got
			}
			return s.token(ctx, *sb, p)
		}
	})
	var unresolved *UnresolvedError
	switch {
	case errors.As(err, &unresolved):
		return "", err
	case err != nil && sandbox.KindOf(err) == sandbox.KindInvalid:
		return "", &UnresolvedError{Reason: sandbox.Message(err)}
	case err != nil:
		return "", err
	case out != value && !httpguts.ValidHeaderFieldValue(out):
		return "", &UnresolvedError{Reason: "the resolved value is not a valid header value"}
	}
	return out, nil
}

func (s *Service) secretValue(ctx context.Context, teamID string, p sandbox.Placeholder) (string, error) {
	sec, err := s.cfg.Store.SecretByName(ctx, teamID, strings.ToLower(p.Name))
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return "", &UnresolvedError{Placeholder: p.Text, Reason: fmt.Sprintf("the sandbox's team has no secret named %q", strings.ToLower(p.Name))}
	}
	if err != nil {
		return "", err
	}
	// A value that does not open is the operator's to fix (the key), not
	// the sandbox's: an error to log, not an UnresolvedError.
	v, err := s.seal.open(sec.TeamID, sec.ID, sec.Version, sec.Sealed)
	if err != nil {
		return "", fmt.Errorf("secret %s (%s) of team %s: %w", sec.Name, sec.ID, sec.TeamID, err)
	}
	return v, nil
}

// workload returns the sandbox a token is minted for: it must be the
// team's and alive.
func (s *Service) workload(ctx context.Context, sandboxID, teamID string, p sandbox.Placeholder) (sandbox.Sandbox, error) {
	if s.cfg.Tokens == nil || s.cfg.Sandboxes == nil {
		return sandbox.Sandbox{}, &UnresolvedError{Placeholder: p.Text, Reason: "workload identity is not enabled on this server"}
	}
	sb, err := s.cfg.Sandboxes.GetSandbox(ctx, sandboxID)
	if sandbox.KindOf(err) == sandbox.KindNotFound || err == nil && sb.TeamID != teamID {
		return sandbox.Sandbox{}, &UnresolvedError{Placeholder: p.Text, Reason: fmt.Sprintf("sandbox %s of team %s not found", sandboxID, teamID)}
	}
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if sb.State != sandbox.StateRunning && sb.State != sandbox.StateCreating {
		return sandbox.Sandbox{}, &UnresolvedError{Placeholder: p.Text, Reason: fmt.Sprintf("sandbox %s is %s", sandboxID, sb.State)}
	}
	return sb, nil
}

func (s *Service) token(ctx context.Context, sb sandbox.Sandbox, p sandbox.Placeholder) (string, error) {
	def, ok := sb.IAM.Tokens[p.Name]
	if !ok {
		return "", &UnresolvedError{Placeholder: p.Text, Reason: fmt.Sprintf("the sandbox's iam.tokens has no token %q", p.Name)}
	}
	return s.cfg.Tokens.Mint(ctx, def.Audience, sb.ID, sb.TeamID)
}

// CheckRules reports, as KindInvalid naming it, the first placeholder in
// rules that cannot resolve for a sandbox of team with iam: a secret the
// team does not have, a token iam does not define. The rules must have
// passed sandbox.NormalizeRules. A secret deleted later is caught by
// Expand, at send time.
func (s *Service) CheckRules(ctx context.Context, team string, rules map[string][]sandbox.NetworkRule, iam sandbox.IAM) error {
	if err := sandbox.CheckTokens(rules, iam); err != nil {
		return err
	}
	for _, p := range sandbox.RulePlaceholders(rules) {
		if p.Kind != sandbox.PlaceholderSecret {
			continue
		}
		_, err := s.cfg.Store.SecretByName(ctx, team, strings.ToLower(p.Name))
		if sandbox.KindOf(err) == sandbox.KindNotFound {
			return sandbox.Errorf(sandbox.KindInvalid, "network.rules: placeholder %s names no secret of this team (create it first: Secret.create)", p.Text)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
