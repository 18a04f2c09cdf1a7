// Package bench holds sandgate's benchmarks. They run against real components (the gateway binary, Docker, sandbox
// images) and print ratios against baselines measured in the same run; run them with `make bench`.
package bench
