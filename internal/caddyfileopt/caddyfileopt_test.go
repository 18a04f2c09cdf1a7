package caddyfileopt

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

type settings struct {
	name, opt      string
	n, pos         int
	f              float64
	dur, pdur, off caddy.Duration
	nneg           caddy.Duration
	flag, flagArg  bool
	list           []string
	checked        string
	nested         string
}

func (s *settings) block() Block {
	return Block{
		"name":     String(&s.name),
		"opt":      OptString(&s.opt, "default"),
		"n":        Int(&s.n),
		"pos":      PositiveInt("pos", &s.pos),
		"f":        Float("f", &s.f),
		"dur":      Duration(&s.dur),
		"pdur":     PositiveDuration("pdur", &s.pdur),
		"nneg":     NonNegativeDuration("nneg", &s.nneg),
		"off":      DurationOrOff("off", &s.off),
		"flag":     Flag(&s.flag),
		"flag_arg": FlagArg(&s.flagArg, &s.opt),
		"list":     List(&s.list),
		"checked": Arg(func(v string) error {
			if v != "ok" {
				return errNotOK
			}
			s.checked = v
			return nil
		}),
		"nested": func(d *caddyfile.Dispenser) error {
			if err := NoArgs(d); err != nil {
				return err
			}
			return Block{"inner": String(&s.nested)}.Parse(d, "unknown nested option %q")
		},
	}
}

var errNotOK = &notOK{}

type notOK struct{}

func (*notOK) Error() string { return "checked: not ok" }

func parse(src string) (*settings, error) {
	d := caddyfile.NewTestDispenser(src)
	d.Next()
	s := new(settings)
	if err := NoArgs(d); err != nil {
		return s, err
	}
	return s, s.block().Parse(d, "unknown test option %q")
}

// TestBlock: every reader puts its arguments where its row says, and each refuses a wrong count or value with a
// Caddyfile error that names the option (and the line), as caddymodule's parsers did by hand.
func TestBlock(t *testing.T) {
	s, err := parse(`test {
		name a
		opt
		n -3
		pos 2
		f 1.5
		dur 1d
		pdur 90s
		off off
		flag
		list a b
		list c
		checked ok
		nested {
			inner x
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	want := settings{name: "a", opt: "default", n: -3, pos: 2, f: 1.5, dur: caddy.Duration(24 * time.Hour),
		pdur: caddy.Duration(90 * time.Second), off: -1, flag: true, list: []string{"a", "b", "c"}, checked: "ok", nested: "x"}
	if s.name != want.name || s.opt != want.opt || s.n != want.n || s.pos != want.pos || s.f != want.f || s.dur != want.dur ||
		s.pdur != want.pdur || s.off != want.off || !s.flag || strings.Join(s.list, " ") != "a b c" || s.checked != "ok" || s.nested != "x" {
		t.Fatalf("got %+v\nwant %+v", *s, want)
	}
	if s, err := parse("test {\n flag_arg dir\n off 5m\n}"); err != nil || !s.flagArg || s.opt != "dir" || s.off != caddy.Duration(5*time.Minute) {
		t.Fatalf("flag_arg: %+v, %v", s, err)
	}
	for src, want := range map[string]caddy.Duration{"test {\n nneg 0s\n}": 0, "test {\n nneg 5s\n}": caddy.Duration(5 * time.Second)} {
		if s, err := parse(src); err != nil || s.nneg != want {
			t.Fatalf("%q: %+v, %v", src, s, err)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"test extra", "wrong argument count"},
		{"test {\n name\n}", "wrong argument count"},
		{"test {\n name a b\n}", "wrong argument count"},
		{"test {\n opt a b\n}", "wrong argument count"},
		{"test {\n flag yes\n}", "wrong argument count"},
		{"test {\n list\n}", "wrong argument count"},
		{"test {\n n x\n}", `"x" is not an integer`},
		{"test {\n pos 0\n}", `pos: want a positive number, got "0"`},
		{"test {\n f x\n}", `f "x" is not a number`},
		{"test {\n dur soon\n}", `"soon" is not a duration`},
		{"test {\n pdur 0s\n}", `pdur must be a positive duration, not "0s"`},
		{"test {\n nneg -1s\n}", `nneg must be a duration, not "-1s"`},
		{"test {\n nneg soon\n}", `nneg must be a duration, not "soon"`},
		{"test {\n off -1s\n}", `off "-1s": a positive duration or off`},
		{"test {\n checked no\n}", "checked: not ok, at Testfile:2"},
		{"test {\n nested {\n  other 1\n }\n}", `unknown nested option "other"`},
		{"test {\n what 1\n}", `unknown test option "what", at Testfile:2`},
	} {
		if _, err := parse(tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}

// TestModule: a module option hands the module's name and unmarshaled value on, after the check, which may refuse.
func TestModule(t *testing.T) {
	d := caddyfile.NewTestDispenser("driver nothere {\n}")
	d.Next()
	err := Module("sandboxes.drivers", nil, func(string, caddyfile.Unmarshaler) { t.Fatal("set called") })(d)
	if err == nil {
		t.Fatal("an unregistered module was accepted")
	}
	d = caddyfile.NewTestDispenser("driver refused")
	d.Next()
	err = Module("x", func(d *caddyfile.Dispenser, name string) error { return d.Errf("no %s", name) }, nil)(d)
	if err == nil || !strings.Contains(err.Error(), "no refused") {
		t.Fatalf("check: %v", err)
	}
}
