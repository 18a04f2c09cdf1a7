package rkernel

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// ServeExec is POST /v1/r/exec.
func (k *Kernel) ServeExec(w http.ResponseWriter, r *http.Request) {
	var req agentapi.KernelExecRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCodeBytes+1024))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "reading the request body: %v", err))
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "code is empty"))
		return
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if req.TimeoutMS < 0 || timeout > MaxTimeout {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "timeout_ms must be between 1 and %d (0 means %d)",
			MaxTimeout.Milliseconds(), DefaultTimeout.Milliseconds()))
		return
	}
	res, err := k.Exec(r.Context(), req.Code, timeout)
	if errors.Is(err, ErrRMissing) {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotSupported, "%v", err))
		return
	}
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeUnavailable, "%v", err))
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, res)
}
