// Package kubernetes is sandgate's opt-in Kubernetes support, a Go module of its own so that a single-host gateway
// never compiles client-go: importing it registers the `sandboxes.drivers.kubernetes` Caddy module (module.go),
// whose sandboxes are Pods in one namespace of a cluster (docs/kubernetes.md). Build the fleet binary with
//
//	xcaddy build --with github.com/sandgate/sandgate --with github.com/sandgate/sandgate/kubernetes
//
// or, in a checkout, ./xcaddy.sh --kubernetes (or go build ./cmd/caddy in this directory).
//
// Its packages: driver (the sandboxes.Driver over client-go and the fleet's sandbox state in the Kubernetes API),
// driver/kubenames (names and labels the API accepts), fleet (the process-level fleet test on the test cluster)
// and internal/k8senv (the checks of the test cluster itself).
package kubernetes
