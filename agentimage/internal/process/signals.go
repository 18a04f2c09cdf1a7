package process

import (
	"strconv"
	"strings"
	"syscall"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

var signalsByName = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP,
	"CONT": syscall.SIGCONT, "TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH, "ALRM": syscall.SIGALRM,
	"PIPE": syscall.SIGPIPE,
}

// ParseSignal reads "SIGINT", "INT", "int" or "2".
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signalsByName[name]; ok {
		return sig, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	return 0, agentapi.Errorf(agentapi.CodeInvalidRequest, "unknown signal %q", s)
}

func signalName(sig syscall.Signal) string {
	for name, s := range signalsByName {
		if s == sig {
			return "SIG" + name
		}
	}
	return "SIG" + strconv.Itoa(int(sig))
}
