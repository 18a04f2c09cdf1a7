//go:build !linux

package sandboxes

import "errors"

// Socket directories (network none) exist only where the gateway runs beside a Linux Docker engine.
func mountSocketFS(string) error {
	return errors.New("network none needs the gateway on the Linux host of the engine")
}

func unmountSocketFS(string) error { return nil }
