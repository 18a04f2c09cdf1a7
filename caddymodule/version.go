package caddymodule

import (
	"runtime/debug"
	"sync"

	"github.com/sandgate/sandgate/internal/buildversion"
)

const sandgateModule = "github.com/sandgate/sandgate"

// buildVersion is set by the build scripts (xcaddy.sh, from scripts/version.sh) with
// -ldflags "-X github.com/sandgate/sandgate/caddymodule.buildVersion=...".
var buildVersion string

// sandgateVersion is the semantic version of sandgate in this binary, for /health and the containers' version:
// the one the build scripts stamped, else the module version when xcaddy built it as a dependency, else
// 0.0.0-dev.<revision> of a plain `go build ./cmd/caddy`. Never "dev".
var sandgateVersion = sync.OnceValue(func() string {
	if buildVersion != "" {
		return buildversion.Normalize(buildVersion)
	}
	info, _ := debug.ReadBuildInfo()
	return buildversion.FromBuildInfo(info, sandgateModule)
})
