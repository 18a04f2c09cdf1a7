package fastgpt

import "testing"

func TestAgentWSURL(t *testing.T) {
	for _, tc := range []struct {
		name, url, rewrite, channel, perm, token, want string
		wantErr                                        error
	}{
		{"plain host", "10.0.0.5:1318", "", "fs", "read", "tok", "ws://10.0.0.5:1318/fs?token=tok&permission=read", nil},
		{"trimmed and trailing slash", "  http://sb.example:1318/  ", "", "terminal", "write", "t", "ws://sb.example:1318/terminal?token=t&permission=write", nil},
		{"https to wss", "https://devbox-abc-1318.cloud.example", "", "fs", "read", "t", "wss://devbox-abc-1318.cloud.example/fs?token=t&permission=read", nil},
		{"wss kept", "wss://x:1/", "", "fs", "read", "t", "wss://x:1/fs?token=t&permission=read", nil},
		{"proxy path kept", "http://osb:8080/sandboxes/abc/proxy/1318", "", "fs", "read", "t", "ws://osb:8080/sandboxes/abc/proxy/1318/fs?token=t&permission=read", nil},
		{"localhost rewritten", "http://localhost:49153", "host.docker.internal", "fs", "read", "t", "ws://host.docker.internal:49153/fs?token=t&permission=read", nil},
		{"127.0.0.1 rewritten", "127.0.0.1:49153", "host.docker.internal", "fs", "read", "t", "ws://host.docker.internal:49153/fs?token=t&permission=read", nil},
		{"::1 rewritten", "http://[::1]:49153", "gw", "fs", "read", "t", "ws://gw:49153/fs?token=t&permission=read", nil},
		{"not loopback kept", "http://10.1.1.1:1318", "gw", "fs", "read", "t", "ws://10.1.1.1:1318/fs?token=t&permission=read", nil},
		{"no rewrite configured", "http://localhost:1318", "", "fs", "read", "t", "ws://localhost:1318/fs?token=t&permission=read", nil},
		{"token not encoded", "h:1", "", "fs", "read", "a&b=c", "ws://h:1/fs?token=a&b=c&permission=read", nil},
		{"missing token", "h:1", "", "fs", "read", "", "", errAgentTokenMissing},
		{"missing url", "  ", "", "fs", "read", "t", "", errEndpointMissing},
		{"bad scheme", "ftp://h:1", "", "fs", "read", "t", "", errEndpointInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentWSURL(&sandboxAddress{SandboxURL: tc.url, AgentToken: tc.token}, tc.rewrite, tc.channel, tc.perm)
			if err != tc.wantErr || got != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("ws://h:1/fs?token=supersecret&permission=read")
	if got != "ws://h:1/fs?permission=read&token=REDACTED" {
		t.Fatal(got)
	}
}
