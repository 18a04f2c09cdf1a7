package listening

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// Config tunes the listing.
type Config struct {
	// ProcNet is the directory holding tcp and tcp6; default /proc/net (the agent's network namespace, which is
	// the sandbox's).
	ProcNet string
	// Reserved ports are marked with the reason the port proxy refuses them.
	Reserved map[int]string
	Logger   *slog.Logger
}

// Lister lists the sandbox's listening TCP sockets.
type Lister struct {
	cfg Config
}

// New returns a lister.
func New(cfg Config) *Lister {
	if cfg.ProcNet == "" {
		cfg.ProcNet = "/proc/net"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Lister{cfg: cfg}
}

// Routes is what Register needs from the agent's server.
type Routes interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds GET /v1/ports.
func (l *Lister) Register(r Routes) {
	r.HandleFunc("GET /v1/ports", func(w http.ResponseWriter, _ *http.Request) {
		res, err := l.List()
		if err != nil {
			agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInternal, "listing listening ports: %v", err))
			return
		}
		agentapi.WriteJSON(w, http.StatusOK, res)
	})
}

// List reads tcp and tcp6 (a kernel without IPv6 has no tcp6) and returns each listening address and port once,
// sorted by port then address.
func (l *Lister) List() (agentapi.ListeningPorts, error) {
	res := agentapi.ListeningPorts{Ports: []agentapi.ListeningPort{}}
	seen := map[Socket]bool{}
	for _, name := range []string{"tcp", "tcp6"} {
		path := filepath.Join(l.cfg.ProcNet, name)
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) && name == "tcp6" {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("opening %s: %w", path, err)
		}
		socks, err := Parse(f, agentapi.MaxListeningPorts-len(res.Ports))
		f.Close()
		if errors.Is(err, ErrTooMany) {
			res.Truncated = true
		} else if err != nil {
			return res, fmt.Errorf("reading %s: %w", path, err)
		}
		for _, s := range socks {
			s.Addr = s.Addr.Unmap()
			if seen[s] {
				continue
			}
			seen[s] = true
			res.Ports = append(res.Ports, describe(s, l.cfg.Reserved))
		}
		if res.Truncated {
			break
		}
	}
	slices.SortFunc(res.Ports, func(a, b agentapi.ListeningPort) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		return strings.Compare(a.Address, b.Address)
	})
	return res, nil
}

// describe turns a socket into its wire form.
func describe(s Socket, reserved map[int]string) agentapi.ListeningPort {
	p := agentapi.ListeningPort{Port: int(s.Port), Address: s.Addr.String(), Reserved: reserved[int(s.Port)]}
	switch {
	case s.Addr.IsUnspecified():
		p.Scope = agentapi.ScopeAll
	case s.Addr.IsLoopback():
		p.Scope = agentapi.ScopeLoopback
	default:
		p.Scope = agentapi.ScopeInterface
	}
	return p
}
