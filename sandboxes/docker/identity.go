package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandgate/sandgate/sandboxes"
)

// A profile that names its user (Profile.User, Ship's `shipyard`, uid 1000) runs as that uid, with the name known
// to the sandbox's tools (whoami, id, ls -l, Python's pwd): the image's /etc/passwd and /etc/group, with the user in
// place of any entry of the same name or id, mounted read-only over the image's (its root filesystem is read-only,
// so nothing in the sandbox can write them, and the gateway never writes into the sandbox's own trees). The files
// live in the gateway's directory (ContainerSpec.IdentityDir), named by their content, so sandboxes of the same
// image and user share them and a changed one never replaces what a running sandbox reads. The workspace's root is
// handed to the user too: our images make /workspace for uid 65532.

// maxIdentityFile bounds what is read of an image's passwd or group file.
const maxIdentityFile = 1 << 20

// identities caches the passwd and group files of images, by image id: an image's files never change.
type identities struct {
	mu     sync.Mutex
	byImgs map[string]imageIdentity
}

type imageIdentity struct{ passwd, group []byte }

func (c *identities) get(id string) (imageIdentity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byImgs[id]
	return v, ok
}

func (c *identities) put(id string, v imageIdentity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byImgs == nil {
		c.byImgs = map[string]imageIdentity{}
	}
	c.byImgs[id] = v
}

// prepareIdentity, for a profile with a user, gives the workspace's root to the user, makes the passwd and group
// files and mounts them in hc, and keeps the engine from copying the image's /workspace (and its owner) into a new
// workspace. It uses one helper container of the sandbox's image, created and never started.
func (d *Driver) prepareIdentity(ctx context.Context, spec sandboxes.ContainerSpec, hc *container.HostConfig) error {
	p := spec.Profile
	if p.User == nil {
		return nil
	}
	if spec.IdentityDir == "" {
		return errors.New("a profile with a user needs the gateway's identity directory")
	}
	img, err := d.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("inspecting image %s for its users: %w", spec.Image, err)
	}
	helperHC := &container.HostConfig{NetworkMode: "none", Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: spec.Volume,
		Target: sandboxes.WorkspaceMount, VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}}
	helper, remove, err := d.createHelper(ctx, spec.Image, helperHC)
	if err != nil {
		return fmt.Errorf("creating the helper container of the sandbox user: %w", err)
	}
	defer remove()
	ident, ok := d.identities.get(img.ID)
	if !ok {
		if ident, err = d.readIdentity(ctx, helper); err != nil {
			return err
		}
		d.identities.put(img.ID, ident)
	}
	// The root of the workspace only: files inside keep their owners (a shared workspace's other sandboxes).
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(sandboxes.WorkspaceMount, "/") + "/",
		Mode: 0o755, Uid: p.User.UID, Gid: p.User.UID, ModTime: time.Now()}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := d.cli.CopyToContainer(ctx, helper, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("handing the workspace to the sandbox user: %w", err)
	}
	passwd, group, err := writeIdentity(spec.IdentityDir, p, ident)
	if err != nil {
		return err
	}
	for i := range hc.Mounts {
		if hc.Mounts[i].Target == sandboxes.WorkspaceMount && hc.Mounts[i].Type == mount.TypeVolume {
			hc.Mounts[i].VolumeOptions = &mount.VolumeOptions{NoCopy: true}
		}
	}
	hc.Mounts = append(hc.Mounts,
		mount.Mount{Type: mount.TypeBind, Source: passwd, Target: "/etc/passwd", ReadOnly: true},
		mount.Mount{Type: mount.TypeBind, Source: group, Target: "/etc/group", ReadOnly: true})
	return nil
}

// ensureIdentity rewrites a started sandbox's passwd and group files if they are gone (the gateway's directory is
// on /run, which a reboot empties), from the image's files (read again if this driver has not yet).
func (d *Driver) ensureIdentity(ctx context.Context, spec sandboxes.ContainerSpec) error {
	if spec.Profile.User == nil || spec.IdentityDir == "" {
		return nil
	}
	img, err := d.cli.ImageInspect(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("inspecting image %s for its users: %w", spec.Image, err)
	}
	ident, ok := d.identities.get(img.ID)
	if !ok {
		helper, remove, err := d.createHelper(ctx, spec.Image, &container.HostConfig{NetworkMode: "none"})
		if err != nil {
			return fmt.Errorf("creating the helper container of the sandbox user: %w", err)
		}
		defer remove()
		if ident, err = d.readIdentity(ctx, helper); err != nil {
			return err
		}
		d.identities.put(img.ID, ident)
	}
	_, _, err = writeIdentity(spec.IdentityDir, spec.Profile, ident)
	return err
}

// readIdentity reads the image's passwd and group files through a created helper container of it.
func (d *Driver) readIdentity(ctx context.Context, helperID string) (imageIdentity, error) {
	passwd, err := d.readImageFile(ctx, helperID, "/etc/passwd")
	if err != nil {
		return imageIdentity{}, err
	}
	group, err := d.readImageFile(ctx, helperID, "/etc/group")
	if err != nil {
		return imageIdentity{}, err
	}
	return imageIdentity{passwd: passwd, group: group}, nil
}

// readImageFile reads one regular file of a created container's image, at most maxIdentityFile bytes.
func (d *Driver) readImageFile(ctx context.Context, containerID, name string) ([]byte, error) {
	rc, _, err := d.cli.CopyFromContainer(ctx, containerID, name)
	if err != nil {
		return nil, fmt.Errorf("reading the image's %s: %w", name, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("reading the image's %s: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxIdentityFile+1))
		if err != nil {
			return nil, fmt.Errorf("reading the image's %s: %w", name, err)
		}
		if len(b) > maxIdentityFile {
			return nil, fmt.Errorf("the image's %s is over %d bytes", name, maxIdentityFile)
		}
		return b, nil
	}
}

// IdentityFiles are the passwd and group files of p's sandboxes from the image's: every line of the image's but
// those of p's user's name or id (uid in passwd, gid in group), then p's user and its group.
func IdentityFiles(p sandboxes.Profile, imagePasswd, imageGroup []byte) (passwd, group []byte) {
	if p.User == nil {
		return imagePasswd, imageGroup
	}
	id := strconv.Itoa(p.User.UID)
	keep := func(file []byte, line string) []byte {
		var out bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(file))
		sc.Buffer(make([]byte, 0, 4096), maxIdentityFile)
		for sc.Scan() {
			f := strings.Split(sc.Text(), ":")
			if len(f) >= 3 && (f[0] == p.User.Name || f[2] == id) {
				continue
			}
			out.WriteString(sc.Text())
			out.WriteByte('\n')
		}
		out.WriteString(line + "\n")
		return out.Bytes()
	}
	return keep(imagePasswd, p.Passwd()), keep(imageGroup, p.User.Name+":x:"+id+":")
}

// writeIdentity writes p's passwd and group files into dir (if not already there) and returns their paths.
func writeIdentity(dir string, p sandboxes.Profile, ident imageIdentity) (passwd, group string, err error) {
	pw, gr := IdentityFiles(p, ident.passwd, ident.group)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", "", fmt.Errorf("making %s: %w", dir, err)
	}
	if passwd, err = writeByContent(dir, "passwd-", pw); err != nil {
		return "", "", err
	}
	if group, err = writeByContent(dir, "group-", gr); err != nil {
		return "", "", err
	}
	return passwd, group, nil
}

// writeByContent writes b into dir under prefix and its digest, unless a file of that name is there, and returns
// its path. A rename: a reader sees the whole file or none.
func writeByContent(dir, prefix string, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, prefix+hex.EncodeToString(sum[:8]))
	if _, err := os.Lstat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("checking %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+prefix+"*")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
