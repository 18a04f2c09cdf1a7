package bayapi

import (
	"context"
	"net/http"
	"time"
)

// contextWithTimeout bounds an agent call by the request's own context and d.
func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}
