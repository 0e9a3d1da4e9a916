package e2b

import "fmt"

// The error types mirror the error classes of E2B's SDKs. A more specific error unwraps to the
// more general one, so errors.As finds every class an error belongs to: a *FileNotFoundError is
// also a *NotFoundError and a *SandboxError, as FileNotFoundError extends NotFoundError extends
// SandboxError in the official SDKs. Every error unwraps, at the end of that chain, to its
// cause (a transport error, a context error), when it has one.

// SandboxError is the general error of a sandbox operation.
type SandboxError struct {
	// Message says what went wrong, as the server or the SDK put it.
	Message string
	// StatusCode is the HTTP status of the response that failed, 0 when there was none.
	StatusCode int
	// Err is the cause, nil when there is none.
	Err error
}

func (e *SandboxError) Error() string { return e.Message }
func (e *SandboxError) Unwrap() error { return e.Err }

// TimeoutError reports a request or a command that ran out of time, and a sandbox that was
// killed or reached its end of life while a request was in progress.
type TimeoutError struct{ SandboxError }

func (e *TimeoutError) Unwrap() error { return &e.SandboxError }

// InvalidArgumentError reports an argument that the SDK or the server refused.
type InvalidArgumentError struct{ SandboxError }

func (e *InvalidArgumentError) Unwrap() error { return &e.SandboxError }

// NotEnoughSpaceError reports a write that found no space left in the sandbox.
type NotEnoughSpaceError struct{ SandboxError }

func (e *NotEnoughSpaceError) Unwrap() error { return &e.SandboxError }

// NotFoundError reports something that does not exist.
type NotFoundError struct{ SandboxError }

func (e *NotFoundError) Unwrap() error { return &e.SandboxError }

// FileNotFoundError reports a path that does not exist in the sandbox.
type FileNotFoundError struct{ NotFoundError }

func (e *FileNotFoundError) Unwrap() error { return &e.NotFoundError }

// SandboxNotFoundError reports a sandbox that does not exist (or no longer does).
type SandboxNotFoundError struct{ NotFoundError }

func (e *SandboxNotFoundError) Unwrap() error { return &e.NotFoundError }

// TemplateError reports a template that cannot serve the request (an outdated one, say).
type TemplateError struct{ SandboxError }

func (e *TemplateError) Unwrap() error { return &e.SandboxError }

// RateLimitError reports a request refused with 429 after the retries allowed were spent.
type RateLimitError struct{ SandboxError }

func (e *RateLimitError) Unwrap() error { return &e.SandboxError }

// AuthenticationError reports missing or refused credentials. As in E2B's SDKs it is not a
// SandboxError.
type AuthenticationError struct {
	Message string
	Err     error
}

func (e *AuthenticationError) Error() string { return e.Message }
func (e *AuthenticationError) Unwrap() error { return e.Err }

// ServiceBusyError reports a 503 from the control plane (after the retries allowed). As in
// E2B's SDKs it is not a SandboxError.
type ServiceBusyError struct {
	Message string
	Err     error
}

func (e *ServiceBusyError) Error() string { return e.Message }
func (e *ServiceBusyError) Unwrap() error { return e.Err }

// CommandExitError reports a command that ended with a non-zero exit code. It carries the
// command's result.
type CommandExitError struct {
	SandboxError
	Result CommandResult
}

func (e *CommandExitError) Unwrap() error { return &e.SandboxError }

func newCommandExitError(r CommandResult) *CommandExitError {
	msg := r.Error
	if msg == "" {
		msg = fmt.Sprintf("command exited with code %d", r.ExitCode)
	}
	return &CommandExitError{SandboxError: SandboxError{Message: msg}, Result: r}
}

func sandboxErr(status int, msg string, cause error) SandboxError {
	return SandboxError{Message: msg, StatusCode: status, Err: cause}
}

// SecretError is the general error of the secrets API. As in E2B's SDKs it is not a
// SandboxError.
type SecretError struct {
	Message    string
	StatusCode int
}

func (e *SecretError) Error() string { return e.Message }

// SecretNotFoundError reports a secret that does not exist.
type SecretNotFoundError struct{ SecretError }

func (e *SecretNotFoundError) Unwrap() error { return &e.SecretError }

// VolumeError is the general error of the volumes API. As in E2B's SDKs it is not a
// SandboxError.
type VolumeError struct {
	Message    string
	StatusCode int
}

func (e *VolumeError) Error() string { return e.Message }

// VolumeNotFoundError reports a volume that does not exist.
type VolumeNotFoundError struct{ VolumeError }

func (e *VolumeNotFoundError) Unwrap() error { return &e.VolumeError }

// VolumePathNotFoundError reports a path that does not exist in a volume.
type VolumePathNotFoundError struct{ VolumeError }

func (e *VolumePathNotFoundError) Unwrap() error { return &e.VolumeError }

// BuildError reports a template build that failed. As in E2B's SDKs it is not a SandboxError.
type BuildError struct {
	Message    string
	StatusCode int
	// Step names the build step that failed, when the server says.
	Step string
}

func (e *BuildError) Error() string { return e.Message }

// FileUploadError reports a COPY step's files that could not be uploaded.
type FileUploadError struct{ BuildError }

func (e *FileUploadError) Unwrap() error { return &e.BuildError }
