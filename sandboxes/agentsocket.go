package sandboxes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// A sandbox with network none has no interface but loopback: the gateway reaches its agent over a UNIX socket the
// agent creates in a host directory the gateway owns and bind-mounts into the container.
const (
	// SocketMountPoint is where a sandbox sees its socket directory.
	SocketMountPoint = "/run/sandgate"
	// AgentSocketName is the agent's socket inside that directory.
	AgentSocketName = "agent.sock"
	// sandboxUID owns the directory's socket: the images' `sandbox` user, which the agent runs as.
	sandboxUID = 65532
	// socketFSOptions size the tmpfs each socket directory is: the sandbox user must be able to create its
	// socket there, and so can write anything, but never more than this into the host's memory.
	socketFSOptions = "size=64k,nr_inodes=16,mode=0711,uid=65532,gid=65532"
)

// SocketDir is the host directory holding sandbox id's agent socket (used only by network none sandboxes).
func (m *Manager) SocketDir(id string) string { return filepath.Join(m.mcfg.SocketDir, id) }

// prepareSocketDir makes id's socket directory: a tmpfs of its own (64 KiB, 16 inodes), so the sandbox that must
// be able to write its socket there cannot fill the host's /run; writable by the sandbox user only (so code in
// another sandbox, or another host user, cannot plant a socket there), searchable by everyone so root on the host
// can connect. It returns the agent's address as the gateway dials it.
func (m *Manager) prepareSocketDir(id string) (string, error) {
	if !socketDirName.MatchString(id) {
		return "", fmt.Errorf("sandbox id %q cannot name a socket directory", id)
	}
	dir := m.SocketDir(id)
	sock := filepath.Join(dir, AgentSocketName)
	if len(sock) > agentapi.MaxSocketPath() {
		return "", &Error{Code: CodeInvalid, Message: fmt.Sprintf("the agent socket path %s is %d bytes, over the kernel's %d; configure a shorter socket directory", sock, len(sock), agentapi.MaxSocketPath())}
	}
	if err := os.MkdirAll(m.mcfg.SocketDir, 0o711); err != nil {
		return "", fmt.Errorf("creating the socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("creating the socket directory of %s: %w", id, err)
	}
	if err := mountSocketFS(dir); err != nil {
		return "", fmt.Errorf("mounting the socket directory of %s (the gateway must run as root for network none): %w", id, err)
	}
	if err := os.Chown(dir, sandboxUID, sandboxUID); err != nil {
		return "", fmt.Errorf("handing the socket directory of %s to the sandbox user (the gateway must run as root for network none): %w", id, err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("restricting the socket directory of %s: %w", id, err)
	}
	return agentapi.UnixAddr(sock), nil
}

// socketDirName accepts the sandbox ids the Manager makes: a container label naming anything else (a path
// with "/" or "..") never becomes a directory to create or remove.
var socketDirName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// removeSocketDir removes id's socket directory; a missing one is fine.
func (m *Manager) removeSocketDir(id string) error {
	if !socketDirName.MatchString(id) {
		return fmt.Errorf("sandbox id %q cannot name a socket directory", id)
	}
	if err := unmountSocketFS(m.SocketDir(id)); err != nil {
		return fmt.Errorf("unmounting the socket directory: %w", err)
	}
	if err := os.RemoveAll(m.SocketDir(id)); err != nil {
		return fmt.Errorf("removing the socket directory: %w", err)
	}
	return nil
}
