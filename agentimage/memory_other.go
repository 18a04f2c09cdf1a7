//go:build !linux

package main

// protectMemory has nothing to do where the agent never runs as a sandbox's agent.
func protectMemory() error { return nil }
