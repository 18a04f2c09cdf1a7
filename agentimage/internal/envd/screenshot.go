package envd

import (
	"fmt"
	"os"
	"regexp"
	"syscall"
)

// screenshotPath is the one kind of file outside the workspace that envd's file calls reach: @e2b/desktop's
// screenshot(), which has scrot write /tmp/screenshot-<16 letters and digits>.png through a command, then reads it
// with files.read and deletes it with files.remove. Nothing else under /tmp is served, and such a file is opened
// without following a symlink, so the name cannot lead anywhere else (the agent's own /proc entries above all).
var screenshotPath = regexp.MustCompile(`^/tmp/screenshot-[A-Za-z0-9]{16}\.png$`)

// isScreenshot reports whether p, exactly as given, names a desktop screenshot.
func isScreenshot(p string) bool { return screenshotPath.MatchString(p) }

// openScreenshot opens a screenshot for reading: a regular file, never through a symlink (O_NOFOLLOW), never
// blocking on a FIFO planted under that name (O_NONBLOCK).
func openScreenshot(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &pathError{path: p, reason: "is not a regular file", cause: errOutside}
	}
	return f, nil
}

// removeScreenshot deletes the entry itself (a symlink is removed, never followed); a directory is refused.
func removeScreenshot(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &pathError{path: p, reason: "is a directory", cause: errOutside}
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("removing '%s': %w", p, err)
	}
	return nil
}
