package caddymodule

import (
	"runtime/debug"
	"sync"
)

const sandgateModule = "github.com/sandgate/sandgate"

// sandgateVersion is the version of the sandgate module in this binary, for /health: the module version when
// xcaddy built it as a dependency, else the VCS revision of a `go build ./cmd/caddy`, else "dev".
var sandgateVersion = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	version := info.Main.Version
	if info.Main.Path != sandgateModule {
		version = ""
		for _, dep := range info.Deps {
			if dep.Path == sandgateModule {
				version = dep.Version
				if dep.Replace != nil && dep.Replace.Version != "" {
					version = dep.Replace.Version
				}
			}
		}
	}
	if version != "" && version != "(devel)" && version != "v0.0.0" {
		return version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
})
