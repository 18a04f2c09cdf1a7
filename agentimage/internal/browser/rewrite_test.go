package browser

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestRewriteDiscoveryURLs(t *testing.T) {
	const ws = "ws://127.0.0.1:9222/devtools/page/ABC"
	const front = "https://chrome-devtools-frontend.appspot.com/serve_rev/@rev/inspector.html?ws=127.0.0.1:9222/devtools/page/ABC"
	tests := []struct {
		name              string
		headers           map[string]string
		wantWS, wantFront string
		wantHTTP          string
	}{
		{name: "no gateway", wantWS: "ws://agent:7777/cdp/devtools/page/ABC",
			wantFront: "https://chrome-devtools-frontend.appspot.com/serve_rev/@rev/inspector.html?ws=agent:7777/cdp/devtools/page/ABC",
			wantHTTP:  "http://agent:7777/cdp"},
		{name: "https gateway with prefix",
			headers:   map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "gw.example.com", "X-Forwarded-Prefix": "/sandboxes/sb1/cdp/"},
			wantWS:    "wss://gw.example.com/sandboxes/sb1/cdp/devtools/page/ABC",
			wantFront: "https://chrome-devtools-frontend.appspot.com/serve_rev/@rev/inspector.html?wss=gw.example.com/sandboxes/sb1/cdp/devtools/page/ABC",
			wantHTTP:  "https://gw.example.com/sandboxes/sb1/cdp"},
		{name: "lists take the first hop", headers: map[string]string{"X-Forwarded-Proto": "http, https", "X-Forwarded-Host": "a.example:8443, b"},
			wantWS: "ws://a.example:8443/cdp/devtools/page/ABC", wantFront: "https://chrome-devtools-frontend.appspot.com/serve_rev/@rev/inspector.html?ws=a.example:8443/cdp/devtools/page/ABC",
			wantHTTP: "http://a.example:8443/cdp"},
		{name: "hostile headers ignored", headers: map[string]string{"X-Forwarded-Host": "evil.com/x?", "X-Forwarded-Prefix": "//evil.com"},
			wantWS: "ws://agent:7777/cdp/devtools/page/ABC", wantFront: "https://chrome-devtools-frontend.appspot.com/serve_rev/@rev/inspector.html?ws=agent:7777/cdp/devtools/page/ABC",
			wantHTTP: "http://agent:7777/cdp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://agent:7777/cdp/json/list", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			e := externalFrom(r)
			var list []any
			_ = json.Unmarshal([]byte(`[{"id":"ABC","webSocketDebuggerUrl":"`+ws+`","devtoolsFrontendUrl":"`+front+`"}]`), &list)
			e.rewriteTargets(list)
			got := list[0].(map[string]any)
			if got["webSocketDebuggerUrl"] != tc.wantWS || got["devtoolsFrontendUrl"] != tc.wantFront || e.httpURL() != tc.wantHTTP {
				t.Fatalf("got %v %v %v", got["webSocketDebuggerUrl"], got["devtoolsFrontendUrl"], e.httpURL())
			}
		})
	}
	// A relative frontend URL is served by Chromium under our prefix.
	e := external{host: "h", prefix: "/p"}
	if got := e.frontendURL("/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/X"); got != "http://h/p/devtools/inspector.html?ws=h/p/devtools/page/X" {
		t.Fatalf("relative frontend: %s", got)
	}
}
