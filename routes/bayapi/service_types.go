package bayapi

import "github.com/sandgate/sandgate/sandboxes/service"

// The store keeps the service's records under the names it has always used.
type (
	StoredKey    = service.StoredKey
	HistoryEntry = service.HistoryEntry
	Export       = service.Export
)
