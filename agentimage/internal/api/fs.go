package api

import (
	"net/http"

	"github.com/sandgate/sandgate/agentimage/agentapi"
)

// fsCall decodes a JSON request of type Req and answers with do's result.
func fsCall[Req any, Res any](w http.ResponseWriter, r *http.Request, do func(Req) (Res, error)) {
	var req Req
	if err := decode(w, r, &req); err != nil {
		agentapi.WriteError(w, err)
		return
	}
	res, err := do(req)
	reply(w, res, err)
}

func (a *API) fsStat(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.PathRequest) (agentapi.FileInfo, error) { return a.Files.Stat(req.Path) })
}

func (a *API) fsList(w http.ResponseWriter, r *http.Request) { fsCall(w, r, a.Files.List) }

func (a *API) fsMkdir(w http.ResponseWriter, r *http.Request) { fsCall(w, r, a.Files.Mkdir) }

func (a *API) fsMove(w http.ResponseWriter, r *http.Request) { fsCall(w, r, a.Files.Move) }

func (a *API) fsCopy(w http.ResponseWriter, r *http.Request) { fsCall(w, r, a.Files.Copy) }

func (a *API) fsRemove(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.RemoveRequest) (agentapi.OK, error) {
		return agentapi.OK{OK: true}, a.Files.Remove(req)
	})
}

func (a *API) fsRead(w http.ResponseWriter, r *http.Request) { fsCall(w, r, a.Files.Read) }

func (a *API) fsWrite(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.WriteRequest) (agentapi.WriteResult, error) { return a.Files.Write(r.Context(), req) })
}

func (a *API) fsEdit(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.EditRequest) (agentapi.EditResult, error) { return a.Files.Edit(r.Context(), req) })
}

func (a *API) fsGrep(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.GrepRequest) (agentapi.GrepResult, error) { return a.Files.Grep(r.Context(), req) })
}

func (a *API) fsGlob(w http.ResponseWriter, r *http.Request) {
	fsCall(w, r, func(req agentapi.GlobRequest) (agentapi.GlobResult, error) { return a.Files.Glob(r.Context(), req) })
}
