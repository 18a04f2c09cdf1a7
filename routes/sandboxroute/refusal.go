package sandboxroute

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sandgate/sandgate/tickets"
)

// Refused says who a refused request came from, for the log line WriteRefusal writes.
type Refused struct {
	RemoteIP, RequestID string
}

// WriteRefusal answers a request Authorize refused and logs why: 404 for a request that names no sandbox route, 503
// when the fleet's spent-ticket store did not answer (fail closed: the ticket cannot be proven unspent), 403 for a
// session cookie sent from another origin, 401 for every other refusal, whose reason goes to the log only. It
// answers nothing and returns false for an error that is not a refusal (the caller's 500).
func WriteRefusal(w http.ResponseWriter, err error, log *slog.Logger, who Refused) bool {
	ctx := context.Background()
	at := []any{slog.String("remote_ip", who.RemoteIP), slog.String("request_id", who.RequestID)}
	switch {
	case errors.Is(err, ErrNotSandboxRoute):
		WriteJSONError(w, http.StatusNotFound, ErrorDetail{Code: "not_found", Message: "no sandbox route here",
			RequestID: who.RequestID})
	case errors.Is(err, tickets.ErrUnavailable):
		log.Warn("ticket refused: spent-ticket store unavailable", append([]any{slog.Any("error", err)}, at...)...)
		WriteTicketStoreUnavailable(w, who.RequestID)
	case errors.Is(err, ErrCrossOrigin):
		if log.Enabled(ctx, slog.LevelInfo) {
			log.Info("session refused", append([]any{slog.String("reason", "cross_origin"),
				slog.String("detail", err.Error())}, at...)...)
		}
		WriteCrossOrigin(w, who.RequestID)
	case IsRefusal(err):
		if log.Enabled(ctx, slog.LevelInfo) {
			log.Info("ticket refused", append([]any{slog.String("reason", refusalReason(err)),
				slog.String("detail", err.Error())}, at...)...)
		}
		WriteUnauthorized(w, who.RequestID)
	default:
		return false
	}
	return true
}

func refusalReason(err error) string {
	var te *tickets.Error
	if errors.As(err, &te) {
		return string(te.Reason)
	}
	return "unknown"
}
