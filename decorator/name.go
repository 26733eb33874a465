package decorator

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/padlockgo/padlock"
	"github.com/padlockgo/padlock/internal/who"
)

// named returns o naming the function that takes its locks as their
// Caller, "func=<name>": WithName's name, or fn's own (funcName). An
// Options.Caller set by the app stays.
func named(o padlock.Options, cfg *config, fn any) padlock.Options {
	if o.Caller != "" {
		return o
	}
	name := ""
	if cfg != nil {
		name = cfg.name
	}
	if name == "" {
		name = funcName(fn)
	}
	if name != "" {
		o.Caller = who.Join(who.Field("func", name))
	}
	return o
}

// funcName returns the name the Go runtime gives fn, made short and
// plain: without its import path, the receiver's parentheses and star,
// type parameters, the "-fm" of a method value, and the ".funcN" of a
// closure, which is named for the function it is written in:
// "orders.Service.Pay" for (*orders.Service).Pay, "main.run" for a
// closure in run. "" when fn is not a func.
func funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return ""
	}
	name := f.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSuffix(name, "-fm")
	if strings.ContainsAny(name, "([") {
		name = plain.Replace(name)
	}
	for {
		i := strings.LastIndexByte(name, '.')
		if i < 0 || !closurePart(name[i+1:]) {
			return name
		}
		name = name[:i]
	}
}

// plain takes out of a function's name what tells the compiler more
// than a reader: type parameters and the receiver's punctuation.
var plain = strings.NewReplacer("[...]", "", "(*", "", "(", "", ")", "")

// closurePart reports whether s is a part of a function's name that the
// compiler added for a closure ("func2", "3", "gowrap1", "deferwrap1").
func closurePart(s string) bool {
	for _, p := range []string{"func", "gowrap", "deferwrap"} {
		s = strings.TrimPrefix(s, p)
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
