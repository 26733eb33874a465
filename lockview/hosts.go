package lockview

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// An admin listener that trusts whoever reaches it (AdminListener) must
// also check the Host a request names: a page in an operator's browser can
// make attacker.example resolve to 127.0.0.1 (DNS rebinding), and the
// browser then sends it requests with "Host: attacker.example" and lets the
// page read the answers, as they come from the page's own origin. A name
// the attacker controls is the one thing rebinding cannot avoid sending, so
// an admin listener answers only to names that are not the attacker's:
// loopback names (localhost and *.localhost, which resolve to loopback by
// definition, RFC 6761), IP literals (a page can only name them as its
// origin if it was loaded from that address), and the names the operator
// configured.

// AdminHosts returns a middleware for a listener that only operators reach
// (the lock view, metrics, other admin endpoints): it passes on requests
// whose Host (without its port) is "localhost", ends in ".localhost", is an
// IP literal (v4 or v6, so that a Prometheus scrape by pod IP goes
// through), or is one of names (compared without case and without a
// trailing dot); it answers every other request with 421 Misdirected
// Request and a body saying why, as a request that reaches the listener
// under a name of an attacker's is a page in a browser reading it through
// DNS rebinding. Requests it passes on are authorized by AdminListener
// whatever their Host.
//
// Use it around the whole admin handler, with the names operators use to
// reach it (a DNS name behind a private load balancer, say). It panics on a
// name that is not a host name: empty, with a port, a scheme, a path or a
// space.
func AdminHosts(names ...string) func(http.Handler) http.Handler {
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		if err := checkHostName(n); err != nil {
			panic("lockview: AdminHosts: " + err.Error())
		}
		allowed[normHost(n)] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host := requestHost(r)
			if !localHost(host) && !allowed[host] {
				w.Header().Set("Cache-Control", "no-store")
				w.Header().Set("X-Content-Type-Options", "nosniff")
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusMisdirectedRequest)
				fmt.Fprintf(w, "misdirected request: this admin listener answers to localhost, IP addresses and the names it was "+
					"configured with, not to Host %q (a page in a browser may be reaching it through DNS rebinding)\n", limit(r.Host, 100))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), hostCheckedKey{}, true)))
		})
	}
}

// hostCheckedKey marks a request's context once AdminHosts let it through.
type hostCheckedKey struct{}

// adminHost reports whether r may reach an admin listener by its Host: a
// loopback name or an IP literal, or a name AdminHosts let through.
func adminHost(r *http.Request) bool {
	if ok, _ := r.Context().Value(hostCheckedKey{}).(bool); ok {
		return true
	}
	return localHost(requestHost(r))
}

// requestHost returns r's Host without its port, in lower case, without a
// trailing dot, and an IPv6 literal without its brackets.
func requestHost(r *http.Request) string {
	h := r.Host
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return strings.ToLower(h[1:i])
		}
		return "" // not a host
	}
	if strings.Count(h, ":") == 1 {
		h = h[:strings.IndexByte(h, ':')]
	}
	return normHost(h)
}

func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// localHost reports whether host, as requestHost returns it, is a name no
// attacker can have a browser send: a loopback name or an IP literal.
func localHost(host string) bool {
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // an IPv6 zone
		host = host[:i]
	}
	return net.ParseIP(host) != nil
}

// checkHostName checks a name given to AdminHosts.
func checkHostName(n string) error {
	if n == "" || len(n) > 253 {
		return fmt.Errorf("%q is not a host name: want 1 to 253 bytes", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%q is not a host name: want letters, digits, '-', '_' and '.' only (no port, scheme or path)", n)
		}
	}
	return nil
}

// CheckAdminHost reports whether name may be given to AdminHosts: nil,
// or an error saying why not (AdminHosts panics with the same). For an
// app that reads the names from its configuration.
func CheckAdminHost(name string) error {
	if err := checkHostName(name); err != nil {
		return fmt.Errorf("lockview: %w", err)
	}
	return nil
}

func limit(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
