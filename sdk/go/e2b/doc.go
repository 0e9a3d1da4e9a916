// Package e2b is a client for E2B-compatible sandbox servers: Warren, and E2B's own cloud.
//
// It speaks the same wire protocol as E2B's official JavaScript and Python SDKs: the control
// plane's REST API (create, connect, list, pause, kill sandboxes; snapshots, forks, metrics,
// logs; template builds, volumes, secrets) and, inside each sandbox, the agent's Connect RPC
// services (processes, terminals, filesystem, watches), its /files endpoint (uploads,
// downloads, signed URLs), git helpers run as commands, and the code interpreter of the
// code-interpreter-v1 template. It does not yet have the dev container steps of E2B's
// template builder.
//
// # Configuration
//
// NewClient reads the variables E2B's SDKs read — E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL,
// E2B_DOMAIN, E2B_ACCESS_TOKEN, E2B_VOLUME_API_URL and E2B_DEBUG — and then applies its
// options, which win. To use a Warren server, point E2B_API_URL and E2B_SANDBOX_URL at it and
// set E2B_API_KEY.
//
// # Calls
//
// Every call takes a context first; Config.RequestTimeout (60 s) also bounds each request.
// Control-plane requests refused with 429 or 503 and a Retry-After in seconds, and
// idempotent ones whose connection broke, are tried again (Config.Retries, 3).
// Commands and terminals stream their output to io.Writers as it arrives; file contents are
// read and written as byte slices or streamed with io.Reader.
//
// # Errors
//
// Errors are of the types named after E2B's error classes: SandboxError, TimeoutError,
// NotFoundError, FileNotFoundError, SandboxNotFoundError, InvalidArgumentError,
// AuthenticationError, RateLimitError, ServiceBusyError, CommandExitError and the others.
// A specific error also matches the general ones with errors.As, as the classes extend one
// another:
//
//	var nf *e2b.NotFoundError
//	if errors.As(err, &nf) { ... } // true for a *FileNotFoundError too
//
// Calls whose official counterparts answer false instead of failing (Kill of a sandbox that
// is gone, Pause of a paused one, MakeDir of an existing directory, Commands.Kill of an ended
// process) return false with a nil error.
package e2b
