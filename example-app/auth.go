package main

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"
)

// The app's authentication is a fixed set of API keys, each naming a
// caller: enough to show where authentication goes (before idempotency
// and locks) and what it feeds (the idempotency scope), not a user system.

// minAPIKeyLen is the shortest API key accepted: 16 characters.
const minAPIKeyLen = 16

// callerPattern is what a caller's name may be.
var callerPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// apiKeys maps the SHA-256 of each API key to its caller. Looking a key up
// by its digest keeps the lookup's timing from telling an attacker how
// much of a guess matched.
type apiKeys map[[sha256.Size]byte]string

// parseAPIKeys reads API_KEYS: comma-separated caller=key pairs.
func parseAPIKeys(s string) (apiKeys, error) {
	keys := apiKeys{}
	callers := map[string]bool{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		caller, key, ok := strings.Cut(pair, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not caller=key", caller)
		case !callerPattern.MatchString(caller):
			return nil, fmt.Errorf("caller %q: want 1 to 64 letters, digits, '.', '_' or '-'", caller)
		case callers[caller]:
			return nil, fmt.Errorf("caller %q appears twice", caller)
		case len(key) < minAPIKeyLen:
			return nil, fmt.Errorf("caller %q: the key has %d characters, want at least %d", caller, len(key), minAPIKeyLen)
		}
		d := sha256.Sum256([]byte(key))
		if _, dup := keys[d]; dup {
			return nil, fmt.Errorf("caller %q: the key is another caller's too", caller)
		}
		keys[d] = caller
		callers[caller] = true
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no caller=key pairs")
	}
	return keys, nil
}

// parseOperators reads OPERATORS: comma-separated callers of keys that
// may run jobs.
func parseOperators(s string, keys apiKeys) (map[string]bool, error) {
	known := map[string]bool{}
	for _, caller := range keys {
		known[caller] = true
	}
	ops := map[string]bool{}
	for caller := range strings.SplitSeq(s, ",") {
		if caller = strings.TrimSpace(caller); caller == "" {
			continue
		}
		if !known[caller] {
			return nil, fmt.Errorf("%q is not a caller of API_KEYS", caller)
		}
		ops[caller] = true
	}
	return ops, nil
}

// demoOperator is the demo caller that may run jobs, in a run without
// API_KEYS.
const demoOperator = "demo-operator"

// demoAPIKeys returns random keys for two demo callers and a demo
// operator, for a run without API_KEYS; the caller logs them.
func demoAPIKeys() (apiKeys, map[string]string) {
	keys, shown := apiKeys{}, map[string]string{}
	for _, caller := range []string{"demo-alice", "demo-bob", demoOperator} {
		key := "demo_" + rand.Text()
		keys[sha256.Sum256([]byte(key))] = caller
		shown[caller] = key
	}
	return keys, shown
}

// requireOperator lets an operator's request through (OPERATORS), and
// refuses any other caller's with 403 before anything else happens: a
// fleet-wide job is an operator's action, and a caller that is not one
// learns nothing of the jobs, not even whether one is running.
func (s *server) requireOperator(c *gin.Context) {
	if !s.cfg.Operators[callerOf(c)] {
		writeProblem(c, newProblem(http.StatusForbidden, "running a job is an operator's action; this caller is not an operator (OPERATORS)"))
	}
}

// callerKey is the gin context key of the authenticated caller.
type callerKey struct{}

// authenticate lets a request through with its caller set (see callerOf)
// when it carries a known API key as "Authorization: Bearer <key>", and
// refuses it with 401 otherwise.
func (s *server) authenticate(c *gin.Context) {
	scheme, key, _ := strings.Cut(c.GetHeader("Authorization"), " ")
	caller, ok := "", false
	if strings.EqualFold(scheme, "Bearer") && key != "" {
		caller, ok = s.keys[sha256.Sum256([]byte(strings.TrimSpace(key)))]
	}
	if !ok {
		challenge := `Bearer realm="padlock-example"`
		detail := "this route needs an API key, sent as Authorization: Bearer followed by the key"
		if c.GetHeader("Authorization") != "" {
			challenge += `, error="invalid_token"`
			detail = "the API key is not valid"
		}
		c.Header("WWW-Authenticate", challenge)
		writeProblem(c, newProblem(http.StatusUnauthorized, detail))
		return
	}
	c.Set(callerKey{}, caller)
}

// callerOf returns the caller authenticate found, or "" for a request
// that was not authenticated.
func callerOf(c *gin.Context) string {
	v, _ := c.Get(callerKey{})
	s, _ := v.(string)
	return s
}

// callerID is callerOf as a middleware.Caller, the shape both Gin faces
// take: one func names the caller in the order's lock
// (middleware.WithCallerFrom) and scopes its Idempotency-Keys
// (ginidem.New).
func callerID(c *gin.Context) (string, error) { return callerOf(c), nil }
