package main

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(config) bool
		wantErr string
	}{
		{"defaults", nil, func(c config) bool {
			return c.Addr == "127.0.0.1:8080" && c.RedisMode == modeEmbedded && c.DBPath == "" && c.LogFormat == "text"
		}, ""},
		{"one address", map[string]string{"REDIS_ADDR": "localhost:6379"}, func(c config) bool { return c.RedisMode == modeSingle }, ""},
		{"a list is redlock", map[string]string{"REDIS_ADDR": "a:1, b:2,c:3"}, func(c config) bool {
			return c.RedisMode == modeRedlock && len(c.RedisAddrs) == 3 && c.RedisAddrs[1] == "b:2"
		}, ""},
		{"cluster", map[string]string{"REDIS_ADDR": "a:1,b:2", "REDIS_MODE": "cluster"}, func(c config) bool { return c.RedisMode == modeCluster }, ""},
		{"everything", map[string]string{"ADDR": ":9090", "DB_PATH": "/tmp/x.db", "LOG_FORMAT": "json"}, func(c config) bool {
			return c.Addr == ":9090" && c.DBPath == "/tmp/x.db" && c.LogFormat == "json"
		}, ""},
		{"bad mode", map[string]string{"REDIS_ADDR": "a:1", "REDIS_MODE": "sentinel"}, nil, `REDIS_MODE: "sentinel", want single, cluster or redlock`},
		{"mode without address", map[string]string{"REDIS_MODE": "cluster"}, nil, `REDIS_MODE: "cluster" needs REDIS_ADDR`},
		{"single with a list", map[string]string{"REDIS_ADDR": "a:1,b:2", "REDIS_MODE": "single"}, nil, "REDIS_MODE: single takes one address, REDIS_ADDR has 2"},
		{"bad address", map[string]string{"REDIS_ADDR": "localhost"}, nil, `REDIS_ADDR: "localhost" is not host:port`},
		{"bad ADDR", map[string]string{"ADDR": "8080"}, nil, `ADDR: "8080" is not host:port`},
		{"bad log format", map[string]string{"LOG_FORMAT": "xml"}, nil, `LOG_FORMAT: "xml", want text or json`},
		{"api keys", map[string]string{"API_KEYS": "shop-1=0123456789abcdef, shop-2=fedcba9876543210"}, func(c config) bool {
			return len(c.APIKeys) == 2 && c.DemoKeys == nil && c.APIKeys[sha256.Sum256([]byte("fedcba9876543210"))] == "shop-2"
		}, ""},
		{"demo keys", nil, func(c config) bool {
			return len(c.APIKeys) == 3 && len(c.DemoKeys) == 3 && c.APIKeys[sha256.Sum256([]byte(c.DemoKeys["demo-bob"]))] == "demo-bob" &&
				len(c.Operators) == 1 && c.Operators[demoOperator]
		}, ""},
		{"operators", map[string]string{"API_KEYS": "shop-1=0123456789abcdef,ops=fedcba9876543210", "OPERATORS": " ops "}, func(c config) bool {
			return len(c.Operators) == 1 && c.Operators["ops"]
		}, ""},
		{"no operators by default", map[string]string{"API_KEYS": "shop-1=0123456789abcdef"}, func(c config) bool { return len(c.Operators) == 0 }, ""},
		{"unknown operator", map[string]string{"API_KEYS": "shop-1=0123456789abcdef", "OPERATORS": "root"}, nil, `OPERATORS: "root" is not a caller of API_KEYS`},
		{"operators without keys", map[string]string{"OPERATORS": "demo-operator"}, nil, "OPERATORS names callers of API_KEYS, which is not set"},
		{"redlock knobs", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_NODE_TIMEOUT": "250ms", "REDIS_PERSISTENT_NODES": "1"}, func(c config) bool {
			return c.nodeTimeout == 250*time.Millisecond && c.persistentNodes
		}, ""},
		{"redlock defaults", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3"}, func(c config) bool {
			return c.nodeTimeout == 500*time.Millisecond && !c.persistentNodes
		}, ""},
		{"node timeout not below the lease", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_NODE_TIMEOUT": "10s"}, nil, `REDIS_NODE_TIMEOUT: "10s", want a duration above 0 and below the lock lease 10s`},
		{"persistent nodes: bad value", map[string]string{"REDIS_ADDR": "a:1,b:2,c:3", "REDIS_PERSISTENT_NODES": "yes"}, nil, `REDIS_PERSISTENT_NODES: "yes", want 1 or 0`},
		{"redlock knobs off redlock", map[string]string{"REDIS_ADDR": "a:1", "REDIS_PERSISTENT_NODES": "1"}, nil, "REDIS_NODE_TIMEOUT and REDIS_PERSISTENT_NODES apply to REDIS_MODE=redlock only"},
		{"trusted proxies", map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.1"}, func(c config) bool {
			return len(c.trustedProxies) == 2 && c.trustedProxies[1] == "192.0.2.1"
		}, ""},
		{"no trusted proxies by default", nil, func(c config) bool { return c.trustedProxies == nil }, ""},
		{"bad trusted proxy", map[string]string{"TRUSTED_PROXIES": "proxy.local"}, nil, `TRUSTED_PROXIES: "proxy.local" is neither an IP nor a CIDR`},
		{"shutdown grace", map[string]string{"SHUTDOWN_GRACE": "1m30s"}, func(c config) bool { return c.shutdownTimeout == 90*time.Second }, ""},
		{"bad shutdown grace", map[string]string{"SHUTDOWN_GRACE": "10"}, nil, `SHUTDOWN_GRACE: "10", want a duration`},
		{"short api key", map[string]string{"API_KEYS": "shop-1=short"}, nil, `API_KEYS: caller "shop-1": the key has 5 characters, want at least 16`},
		{"api key without caller", map[string]string{"API_KEYS": "0123456789abcdef"}, nil, `API_KEYS: "0123456789abcdef" is not caller=key`},
		{"bad caller", map[string]string{"API_KEYS": "a b=0123456789abcdef"}, nil, `API_KEYS: caller "a b": want`},
		{"shared api key", map[string]string{"API_KEYS": "a=0123456789abcdef,b=0123456789abcdef"}, nil, `API_KEYS: caller "b": the key is another caller's too`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.want(cfg) {
				t.Fatalf("got %+v, %v", cfg, err)
			}
		})
	}
}
