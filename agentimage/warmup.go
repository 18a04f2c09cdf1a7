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

// warmupArg makes the agent exit at once: warmExec runs it as its throwaway child in images without a shell.
const warmupArg = "exec-warmup"

// warmExec runs, once the agent serves, the programs a first command would: the image's bash (exec with a cmd
// runs `bash -c`) and `true` through the dynamic loader. The first process a fresh container starts pays for
// what later ones find ready: the lookups of the loader, libc and the program in the container's new overlay
// mount, and the agent runtime's thread that waits on a child. Measured, a warm sandbox's first exec took about
// twice its second. The warm-up is paid while the sandbox waits in the pool, not by the first command after its
// claim. An image with neither program gets the agent's own binary as the child (the runtime's part only).
func warmExec(logger *slog.Logger) {
	start := time.Now()
	var runs [][]string
	if _, err := os.Stat("/bin/bash"); err == nil {
		runs = append(runs, []string{"/bin/bash", "-c", ":"})
	}
	if p, err := exec.LookPath("true"); err == nil {
		runs = append(runs, []string{p})
	}
	if len(runs) == 0 {
		self, err := os.Executable()
		if err != nil {
			logger.Debug("exec warm-up skipped", "error", err)
			return
		}
		runs = append(runs, []string{self, warmupArg})
	}
	for _, argv := range runs {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{} // nothing of the agent's environment
		cmd.Dir = "/"
		if err := cmd.Run(); err != nil {
			logger.Debug("exec warm-up failed", "argv", argv, "error", err)
		}
	}
	logger.Debug("exec path warmed", "ms", time.Since(start).Milliseconds())
}
