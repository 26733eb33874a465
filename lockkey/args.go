package lockkey

// Arg returns a key func for a function's argument, as decorator.WithLock
// takes it: the key is the part ns, then the value get reads from the
// argument, each escaped and joined by Sep, just as Join(ns, get(a)) would
// build it. The value is taken exactly; format numbers canonically
// (strconv.FormatInt), or put request text through a Canon's Part:
//
//	lockkey.Arg("order", func(r PayRequest) string { return r.OrderID }) // "order:42"
//
// An id of "1:pay" gives "order:1%3Apay", never "order:1:pay". An empty
// value is an error matching ErrMissingPart that names the part as ns.
// Arg panics if ns is empty or get is nil; both are static configuration.
func Arg[A any](ns string, get func(A) string) func(A) (string, error) {
	if ns == "" {
		panic("lockkey: Arg: empty ns")
	}
	if get == nil {
		panic("lockkey: Arg: nil get")
	}
	prefix := Escape(ns) + Sep
	return func(a A) (string, error) {
		v := get(a)
		if v == "" {
			return "", missing(ns)
		}
		return prefix + Escape(v), nil
	}
}

// Args returns a key func that builds the key from the list of raw parts
// that parts reads from a function's argument, escaped and joined by Sep
// exactly as Join does, for keys of more than one value:
//
//	lockkey.Args(func(t Transfer) []string { return []string{"transfer", t.From, t.To} })
//
// Different lists give different keys. An empty list or an empty part is an
// error matching ErrMissingPart naming the part by position ("part 2").
// Args panics if parts is nil.
func Args[A any](parts func(A) []string) func(A) (string, error) {
	if parts == nil {
		panic("lockkey: Args: nil parts")
	}
	return func(a A) (string, error) { return Join(parts(a)...) }
}
