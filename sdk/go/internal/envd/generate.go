// Package envd holds the wire contracts of the in-sandbox agent (E2B's envd) that the SDK
// speaks: the Go code generated from the process and filesystem .proto files of the
// repository's proto/ directory, the one source of the contracts, into packages of this
// module's own, so that the SDK depends on no package of the Warren server.
//
// Regenerate with `go generate ./internal/envd` (needs protoc; the Go plugins are pinned as
// tools in this module's go.mod).
package envd

//go:generate sh -c "PATH=\"$(go env GOROOT)/bin:$PATH\" protoc -I ../../../../proto --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-connect-go=$(go tool -n protoc-gen-connect-go) --go_out=. --go_opt=paths=source_relative --go_opt=Mprocess/process.proto=github.com/warrenhq/warren/sdk/go/internal/envd/process --go_opt=Mfilesystem/filesystem.proto=github.com/warrenhq/warren/sdk/go/internal/envd/filesystem --connect-go_out=. --connect-go_opt=paths=source_relative --connect-go_opt=Mprocess/process.proto=github.com/warrenhq/warren/sdk/go/internal/envd/process --connect-go_opt=Mfilesystem/filesystem.proto=github.com/warrenhq/warren/sdk/go/internal/envd/filesystem process/process.proto filesystem/filesystem.proto"
