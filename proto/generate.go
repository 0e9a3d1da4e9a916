// Package proto holds the agent's wire contracts: the .proto files of the
// process and filesystem services and the Go code generated from them.
//
// Regenerate with `go generate ./proto` (needs protoc; the Go plugins are
// pinned as tools in go.mod).
package proto

//go:generate sh -c "PATH=\"$(go env GOROOT)/bin:$PATH\" protoc -I . --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-connect-go=$(go tool -n protoc-gen-connect-go) --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative process/process.proto filesystem/filesystem.proto"
