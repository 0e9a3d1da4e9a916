module github.com/warrenhq/warren/sdk/go

go 1.25.0

tool (
	connectrpc.com/connect/cmd/protoc-gen-connect-go
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	connectrpc.com/connect v1.19.1
	google.golang.org/protobuf v1.36.12
)

require github.com/google/go-cmp v0.7.0 // indirect
