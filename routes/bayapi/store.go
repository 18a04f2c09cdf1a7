package bayapi

import "github.com/sandgate/sandgate/sandboxes"

// The API's state (stored keys, execution history, cargos, exports) lives in the gateway's one store, the
// Manager's (sandboxes.BoltStore); a cargo is a workspace of the Manager (cargos.go). These are the API's names
// for the store and its records.
type (
	Store        = sandboxes.BoltStore
	StoredKey    = sandboxes.StoredKey
	HistoryEntry = sandboxes.HistoryEntry
	Cargo        = sandboxes.Workspace
	Export       = sandboxes.Export
)

// History limits (sandboxes.MaxHistoryField, sandboxes.MaxHistoryEntries).
const (
	MaxHistoryField   = sandboxes.MaxHistoryField
	MaxHistoryEntries = sandboxes.MaxHistoryEntries
)
