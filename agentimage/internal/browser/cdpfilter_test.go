package browser

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFilterBrowserEnding: the methods that end the browser are answered, ordinary commands pass, and every message
// the filter cannot read exactly as Chromium would is refused (the relay then closes with 1008).
func TestFilterBrowserEnding(t *testing.T) {
	const (
		pass   = "pass"
		refuse = "refuse"
	)
	for _, tc := range []struct{ name, in, want string }{
		{"close", `{"id":7,"method":"Browser.close"}`, `{"id":7,"result":{}}`},
		{"close in a session", `{"id":8,"sessionId":"S1","method":"Browser.close","params":{}}`, `{"id":8,"sessionId":"S1","result":{}}`},
		{"crash", `{"id":9,"method":"Browser.crash"}`, `{"id":9,"result":{}}`},
		{"crash gpu", `{"id":10,"method":"Browser.crashGpuProcess","params":{}}`, `{"id":10,"result":{}}`},
		{"escaped method", `{"id":11,"method":"Browser.\u0063lose"}`, `{"id":11,"result":{}}`},
		{"other command", `{"id":9,"method":"Browser.getVersion"}`, pass},
		{"page command", `{"id":1,"sessionId":"AB12","method":"Page.navigate","params":{"url":"https://example.com"}}`, pass},
		{"close target", `{"id":2,"method":"Target.closeTarget","params":{"targetId":"X"}}`, pass},
		{"negative id", `{"id":-1,"method":"Runtime.evaluate","params":{"expression":"1"}}`, pass},
		// Fail closed.
		{"not json", `hello`, refuse},
		{"empty", ``, refuse},
		{"array", `[{"id":1,"method":"Browser.close"}]`, refuse},
		{"float id", `{"id":1.0,"method":"Browser.close"}`, refuse},
		{"exponent id", `{"id":1e0,"method":"Browser.close"}`, refuse},
		{"string id", `{"id":"1","method":"Browser.close"}`, refuse},
		{"huge id", `{"id":123456789012345678901234567890,"method":"Browser.close"}`, refuse},
		{"no id", `{"method":"Browser.close"}`, refuse},
		{"duplicate method", `{"id":1,"method":"Browser.getVersion","method":"Browser.close"}`, refuse},
		{"duplicate id", `{"id":1,"id":2,"method":"Browser.getVersion"}`, refuse},
		{"invalid utf-8", "{\"id\":1,\"method\":\"Browser.close\",\"params\":{\"x\":\"\xff\"}}", refuse},
		{"invalid utf-8 in method", "{\"id\":1,\"method\":\"Browser.close\xc0\"}", refuse},
		{"numeric session", `{"id":1,"sessionId":5,"method":"Browser.close"}`, refuse},
		{"null session", `{"id":1,"sessionId":null,"method":"Browser.getVersion"}`, pass},
		{"case-folded member", `{"id":1,"Method":"Browser.close","method":"Browser.getVersion"}`, refuse},
		{"unknown member", `{"id":1,"method":"Browser.getVersion","extra":1}`, refuse},
		{"params array", `{"id":1,"method":"Browser.close","params":[]}`, refuse},
		{"method not a string", `{"id":1,"method":["Browser.close"]}`, refuse},
		{"method with space", `{"id":1,"method":"Browser.close "}`, refuse},
		{"method with NUL", `{"id":1,"method":"Browser.close\u0000"}`, refuse},
		{"trailing data", `{"id":1,"method":"Browser.getVersion"}{"id":2,"method":"Browser.close"}`, refuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, err := filterBrowserEnding([]byte(tc.in))
			switch tc.want {
			case pass:
				if err != nil || reply != nil {
					t.Fatalf("reply %s, err %v; want it forwarded", reply, err)
				}
			case refuse:
				if err == nil {
					t.Fatalf("reply %s; want it refused", reply)
				}
			default:
				if err != nil || string(reply) != tc.want {
					t.Fatalf("reply %s, err %v; want %s", reply, err, tc.want)
				}
			}
		})
	}
}

// FuzzCDPFilter: the filter never panics, and a message it forwards is one Go's lenient decoder reads the same way
// with no browser-ending method anywhere in it.
func FuzzCDPFilter(f *testing.F) {
	for _, s := range []string{`{"id":7,"method":"Browser.close"}`, `{"id":1.0,"method":"Browser.close"}`,
		`{"id":1,"method":"Browser.getVersion","method":"Browser.close"}`, `{"id":1,"sessionId":5,"method":"Browser.crash"}`,
		"{\"id\":1,\"method\":\"Browser.close\xff\"}", `{"id":1,"sessionId":"S","method":"Page.navigate","params":{"url":"x"}}`,
		`{"id":3,"method":"Browser.crashGpuProcess"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		reply, err := filterBrowserEnding(msg)
		if err != nil || reply != nil {
			return
		}
		var lenient struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(msg, &lenient) != nil {
			t.Fatalf("forwarded %q, which encoding/json cannot read", msg)
		}
		if browserEnding[lenient.Method] || browserEnding[strings.TrimSpace(lenient.Method)] {
			t.Fatalf("forwarded %q: method %q ends the browser", msg, lenient.Method)
		}
	})
}
