package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Ports for the gateways and servers tests start are picked below the kernel's ephemeral range (32768 and up on
// Linux by default): a port the kernel handed out with `listen :0` and that the test closed again is next in line
// for any outgoing connection on the machine (a container pull, another test's client), which then holds it when
// the gateway binds it ("address already in use"). Below that range only explicit binds take ports, and those of
// tests are reserved across processes: every test package runs in a process of its own (go test -p), so each pick
// also takes an exclusive lock on a file named after the port, kept until the process exits.
const (
	portLow  = 20000
	portHigh = 32767
)

var portLocks struct {
	sync.Mutex
	held map[int]*os.File // never closed: a lock is released when the process exits
}

// FreePort returns a port that is free on every address, for TCP and UDP (Caddy's HTTPS port also serves HTTP/3
// over UDP), and that no other test process on this machine has picked.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 500 {
		port := portLow + rand.IntN(portHigh-portLow+1)
		if reservePort(port) && portFree(port) {
			return port
		}
	}
	t.Fatalf("finding a free port: none free of 500 tried in %d-%d", portLow, portHigh)
	return 0
}

// reservePort takes this process's lock on port; false when this or another test process holds it.
func reservePort(port int) bool {
	portLocks.Lock()
	defer portLocks.Unlock()
	if _, ok := portLocks.held[port]; ok {
		return false
	}
	dir := filepath.Join(os.TempDir(), "sandgate-test-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	if portLocks.held == nil {
		portLocks.held = map[int]*os.File{}
	}
	portLocks.held[port] = f
	return true
}

// portFree says whether port can be bound on every address, for TCP and for UDP.
func portFree(port int) bool {
	addr := fmt.Sprintf(":%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}
