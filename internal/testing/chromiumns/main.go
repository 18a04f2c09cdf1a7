// Command chromiumns runs Chromium for the browser tests in a network namespace of its own, where it reaches the
// machine's loopback only through a SOCKS5 proxy this command serves inside that namespace.
//
// Why: Chromium fails every request in flight (net::ERR_NETWORK_CHANGED) when an address or a link in its network
// namespace changes, and the Docker engine adds and removes bridges, veths and their addresses for every container
// the tests start. A navigation, a fetch or an EventSource then failed for a reason that had nothing to do with the
// gateway, and the test scripts grew retries that could never cover every request a page makes. In a namespace of
// its own Chromium sees one interface, its loopback, which never changes.
//
// Playwright starts this command as it would start Chromium (its executablePath): the arguments, the standard
// streams and the DevTools pipe (file descriptors 3 and 4) pass through to Chromium unchanged. The proxy connects
// only to the machine's loopback, for localhost, *.localhost and loopback addresses, and refuses everything else:
// the browser tests reach nothing but what they started. SANDGATE_CHROMIUM_BINARY names the browser
// (/usr/bin/chromium by default).
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chromiumns:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// run starts Chromium with args in a new network namespace and returns its exit status.
func run(args []string) (int, error) {
	browser := os.Getenv("SANDGATE_CHROMIUM_BINARY")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	// The new namespace belongs to this thread alone, which stays locked to this goroutine until the process exits.
	// What is made on it lives in the namespace: the loopback switched on, the proxy's listening socket and Chromium,
	// forked from it. The proxy's connections are dialled from other goroutines, so from threads still in the
	// machine's namespace (the runtime makes new threads from a template thread, never from a locked one).
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return 0, fmt.Errorf("making a network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return 0, fmt.Errorf("switching on the namespace's loopback: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listening for the browser's proxy connections: %w", err)
	}
	go serve(ln, dialLoopback)

	cmd := exec.Command(browser, append(args,
		"--proxy-server=socks5://"+ln.Addr().String(),
		// Chromium never proxies loopback names by default; "<-loopback>" takes that rule away.
		"--proxy-bypass-list=<-loopback>")...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = devtoolsPipe()
	// The browser dies with this thread, which is this process's life.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", browser, err)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	default:
		return 0, fmt.Errorf("waiting for %s: %w", browser, err)
	}
}

// devtoolsPipe is the pipe Playwright speaks DevTools over (--remote-debugging-pipe reads fd 3 and writes fd 4),
// handed on when this process was given it.
func devtoolsPipe() []*os.File {
	for _, fd := range []int{3, 4} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil
		}
	}
	return []*os.File{os.NewFile(3, "devtools-in"), os.NewFile(4, "devtools-out")}
}

// loopbackUp switches on lo in the calling thread's network namespace: a new namespace's loopback starts down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dialLoopback connects to port on the machine's loopback.
func dialLoopback(ip net.IP, port uint16) (net.Conn, error) {
	return net.DialTimeout("tcp", net.JoinHostPort(ip.String(), fmt.Sprint(port)), 30*time.Second)
}
