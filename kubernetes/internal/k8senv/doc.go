// Package k8senv has no code of its own: its tests check the shared test cluster that scripts/cluster.sh builds and
// runs (docs/kubernetes.md, "Test cluster"), so a broken cluster shows up as a cluster failure rather than as a
// failure of every driver test that uses it. The helpers tests use are internal/testing/testenv's (kube.go).
package k8senv
