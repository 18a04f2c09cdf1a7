package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestExtrasClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(TokenHeader) != "tok" {
			WriteError(w, Errorf(CodeUnauthorized, "no"))
			return
		}
		switch r.URL.Path {
		case "/v1/python/exec":
			var req PythonExecRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Code == "crash" {
				WriteError(w, Errorf(CodeKernelDied, "gone"))
				return
			}
			res := "2"
			WriteJSON(w, 200, PythonExecResult{Success: true, Result: &res, Images: []string{}, ExecutionCount: 1})
		default:
			WriteError(w, Errorf(CodeNotFound, "no route"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	res, err := NewClient(srv.URL+"/", "tok", nil).PythonExec(ctx, PythonExecRequest{Code: "1+1"})
	if err != nil || !res.Success || *res.Result != "2" {
		t.Fatalf("%v %+v", err, res)
	}
	for _, tc := range []struct {
		name, token, code, want string
	}{
		{"kernel died", "tok", "crash", CodeKernelDied},
		{"bad token", "bad", "1", CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient(srv.URL, tc.token, nil).PythonExec(ctx, PythonExecRequest{Code: tc.code})
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.want {
				t.Fatalf("want %s, got %v", tc.want, err)
			}
		})
	}
	if _, err := NewClient(srv.URL, "tok", nil).BrowserInfo(ctx); err == nil {
		t.Fatal("want not_found")
	}
}
