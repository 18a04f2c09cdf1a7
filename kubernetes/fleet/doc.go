// Package fleet holds the process-level fleet test on the Kubernetes test cluster: two real gateway processes (the
// fleet binary, testenv.KubeCaddyBinary) run deploy/kubernetes as it ships and share one namespace's sandboxes
// through the Kubernetes API and one Redis for tickets. It is a package of its own, not a test of the module's root
// package, because make test-k8s runs every test of each package that uses testenv.KubeCluster: here that is this
// test alone.
package fleet
