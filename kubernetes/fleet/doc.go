// Package fleetk8s holds the process-level fleet test on the Kubernetes test cluster: two real gateway processes
// (the built caddy binary) share one namespace's sandboxes through the Kubernetes API and one Redis for tickets.
// It is a package of its own, not a file in caddymodule, because make test-k8s runs every test of each package
// that uses testenv.KubeCluster: here that is this one test, not the whole Docker-based caddymodule suite.
package fleetk8s
