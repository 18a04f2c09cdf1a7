package caddymodule

import (
	"sync"

	"github.com/sandgate/sandgate/internal/buildversion"
)

// buildVersion is set by the build scripts (xcaddy.sh, from scripts/version.sh) with
// -ldflags "-X github.com/sandgate/sandgate/caddymodule.buildVersion=...".
var buildVersion string

// sandgateVersion is the semantic version of sandgate in this binary, for /health and the containers' version.
var sandgateVersion = sync.OnceValue(func() string { return buildversion.Of(buildVersion, "github.com/sandgate/sandgate") })
