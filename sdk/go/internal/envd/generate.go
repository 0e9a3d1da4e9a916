// Package envd holds the wire contracts of the in-sandbox agent (E2B's envd) that the SDK
// speaks: copies of the process and filesystem .proto files and the Go code generated from
// them. The SDK keeps its own copy so that it depends on no package of the Warren server.
//
// Regenerate with `go generate ./internal/envd` (needs protoc; the Go plugins are pinned as
// tools in this module's go.mod).
package envd

//go:generate sh -c "PATH=\"$(go env GOROOT)/bin:$PATH\" protoc -I . --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-connect-go=$(go tool -n protoc-gen-connect-go) --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto"
