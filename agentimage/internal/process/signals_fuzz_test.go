package process

import "testing"

// FuzzParseSignal: whatever signal a caller names, the parse never panics, and an accepted one is a real signal
// number (1-64) whose name reads back as the same signal.
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"SIGINT", "int", " term ", "9", "0", "65", "-1", "SIGSIGKILL", "sig", "", "1e3", "+2", "SIG15"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := ParseSignal(s)
		if err != nil {
			return
		}
		if sig < 1 || sig > 64 {
			t.Fatalf("%q gave signal %d", s, sig)
		}
		if back, err := ParseSignal(signalName(sig)); err != nil || back != sig {
			t.Fatalf("%q gave %d, named %s, which reads as %d %v", s, sig, signalName(sig), back, err)
		}
	})
}
