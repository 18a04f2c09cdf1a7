package main

import (
	"log/slog"
	"os"
	"os/exec"
	"time"
)

// processStart is when the agent's process began (package initialisation): the start-up time it logs runs from
// here to serving.
var processStart = time.Now()

// warmupArg makes the agent exit at once: warmExec runs it as its throwaway child.
const warmupArg = "exec-warmup"

// warmExec spawns and reaps one child that exits at once, right after the agent serves. The first process an
// agent starts pays for what its later ones find ready (the runtime's extra thread that waits on the child, the
// fork path's first faults), measured at about twice a later exec; a warm sandbox pays it while it waits in the
// pool rather than in the first command after its claim. The agent's own binary is the child, so this works in
// any image.
func warmExec(logger *slog.Logger) {
	self, err := os.Executable()
	if err != nil {
		logger.Debug("exec warm-up skipped", "error", err)
		return
	}
	start := time.Now()
	cmd := exec.Command(self, warmupArg)
	cmd.Env = []string{} // nothing of the agent's environment
	if err := cmd.Run(); err != nil {
		logger.Debug("exec warm-up failed", "error", err)
		return
	}
	logger.Debug("exec path warmed", "ms", time.Since(start).Milliseconds())
}
