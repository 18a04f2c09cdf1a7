package pykernel

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// maxCodeBytes bounds a cell's source.
const maxCodeBytes = 4 << 20

// Routes is what Register needs from the agent's server.
type Routes interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds POST /v1/python/exec and POST /v1/python/restart.
func (k *Kernel) Register(r Routes) {
	r.HandleFunc("POST /v1/python/exec", k.serveExec)
	r.HandleFunc("POST /v1/python/restart", k.serveRestart)
}

func (k *Kernel) serveExec(w http.ResponseWriter, r *http.Request) {
	var req agentapi.PythonExecRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCodeBytes))
	if err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeTooLarge, "python code is over %d bytes", maxCodeBytes))
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "decoding python exec request: %v", err))
		return
	}
	if req.TimeoutMS < 0 {
		agentapi.WriteError(w, agentapi.Errorf(agentapi.CodeInvalidRequest, "timeout_ms must not be negative"))
		return
	}
	res, err := k.Exec(r.Context(), req.Code, time.Duration(req.TimeoutMS)*time.Millisecond)
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, res)
}

func (k *Kernel) serveRestart(w http.ResponseWriter, r *http.Request) {
	res, err := k.Restart(r.Context())
	if err != nil {
		agentapi.WriteError(w, err)
		return
	}
	agentapi.WriteJSON(w, http.StatusOK, res)
}
