#!/usr/bin/env bash
# Regenerates the Go code of envd's protobuf services into envdpb/ from spec/*/*.proto, our own definition of the
# wire contract E2B's envd speaks (checked against the npm e2b SDK's descriptors by wire_contract_test.go): message
# types with protoc-gen-go and Connect handlers with protoc-gen-connect-go, both pinned in tools/go.mod. protoc is
# Debian's protobuf-compiler. Run through `go generate ./agentimage/internal/envd/`.
set -euo pipefail
cd "$(dirname "$0")"
root="$(git rev-parse --show-toplevel)"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -modfile=tools/go.mod -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go)
mod=github.com/sandgate/sandgate/agentimage/internal/envd/envdpb
rm -rf envdpb
mkdir -p envdpb
PATH="$bin:$PATH" protoc -I spec \
	--go_out=envdpb --go_opt=paths=source_relative \
	--go_opt=Mprocess/process.proto=$mod/process --go_opt=Mfilesystem/filesystem.proto=$mod/filesystem \
	--connect-go_out=envdpb --connect-go_opt=paths=source_relative \
	--connect-go_opt=Mprocess/process.proto=$mod/process --connect-go_opt=Mfilesystem/filesystem.proto=$mod/filesystem \
	process/process.proto filesystem/filesystem.proto
