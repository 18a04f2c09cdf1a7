package hostrewrite

import "testing"

func TestAddr(t *testing.T) {
	tests := []struct{ in, repl, want string }{
		{"127.0.0.1:32768", "host.docker.internal", "host.docker.internal:32768"},
		{"localhost:7777", "host.docker.internal", "host.docker.internal:7777"},
		{"LocalHost:7777", "gw", "gw:7777"},
		{"[::1]:7777", "host.docker.internal", "host.docker.internal:7777"},
		{"[::1]:7777", "fd00::1", "[fd00::1]:7777"},
		{"127.0.0.1:7777", "  ", "127.0.0.1:7777"},
		{"127.0.0.1:7777", "", "127.0.0.1:7777"},
		{"172.17.0.5:7777", "host.docker.internal", "172.17.0.5:7777"},
		{"127.0.0.2:7777", "host.docker.internal", "127.0.0.2:7777"},
		{"localhost.example.com:80", "x", "localhost.example.com:80"},
		{"localhost", "x", "x"},
	}
	for _, tc := range tests {
		if got := Addr(tc.in, tc.repl); got != tc.want {
			t.Errorf("Addr(%q, %q) = %q, want %q", tc.in, tc.repl, got, tc.want)
		}
	}
}

func TestURL(t *testing.T) {
	tests := []struct{ in, repl, want string }{
		{"http://127.0.0.1:8080", "host.docker.internal", "http://host.docker.internal:8080"},
		{"127.0.0.1:8080/base", "host.docker.internal", "http://host.docker.internal:8080/base"},
		{"https://localhost/x?y=1", "gw", "https://gw/x?y=1"},
		{"ws://[::1]:9000", "host.docker.internal", "ws://host.docker.internal:9000"},
		{"http://[::1]", "fd00::2", "http://[fd00::2]"},
		{"http://10.0.0.1:8080", "host.docker.internal", "http://10.0.0.1:8080"},
		{"http://127.0.0.1:8080", "", "http://127.0.0.1:8080"},
	}
	for _, tc := range tests {
		got, err := URL(tc.in, tc.repl)
		if err != nil || got != tc.want {
			t.Errorf("URL(%q, %q) = %q, %v; want %q", tc.in, tc.repl, got, err, tc.want)
		}
	}
	for _, bad := range []string{"http://", "http://%zz"} {
		if _, err := URL(bad, "x"); err == nil {
			t.Errorf("URL(%q) succeeded", bad)
		}
	}
}
