package linekernel

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// maxCodeBytes bounds one request's code.
const maxCodeBytes = 4 << 20

// ServeExec is POST /v1/<kernel>/exec: a KernelExecRequest in, a KernelExecResult out. A missing interpreter is
// not_supported, a kernel that does not start unavailable.
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
	if req.TimeoutMS < 0 || timeout > k.spec.MaxTimeout {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "timeout_ms must be between 1 and %d (0 means %d)",
			k.spec.MaxTimeout.Milliseconds(), k.spec.DefaultTimeout.Milliseconds()))
		return
	}
	res, err := k.Exec(r.Context(), req.Code, timeout)
	if errors.Is(err, k.spec.Missing) {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeNotSupported, "%v", err))
		return
	}
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeUnavailable, "%v", err))
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, res)
}
