package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/padlockgo/padlock/internal/redistest"
)

// requirePass makes srv refuse every client that does not log in as user
// with password: a server that requires AUTH, as docs/security-deployment.md asks of a
// deployment. user "default" is requirepass.
func requirePass(t *testing.T, srv *redistest.Server, user, password string) {
	t.Helper()
	ctx := context.Background()
	c := srv.Client(t)
	if user == "default" {
		if err := c.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, args := range [][]any{
		{"ACL", "SETUSER", user, "on", ">" + password, "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "default", "off"},
	} {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// payOnce creates an order and pays it through ts, failing t unless both
// work: the app reaches its Redis.
func payOnce(t *testing.T, c *http.Client, url string) {
	t.Helper()
	r := do(t, c, "POST", url+"/orders", `{"customer":"alice","amount_cents":1299,"currency":"EUR"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: got %d %s, want 201", r.status, r.raw)
	}
	if r := do(t, c, "POST", fmt.Sprintf("%s/orders/%v/pay", url, r.body["id"]), ""); r.status != http.StatusOK || r.body["charge"] == nil {
		t.Fatalf("pay: got %d %s, want 200 with a charge", r.status, r.raw)
	}
}

// REDIS_ADDR takes redis:// URLs carrying a user and password, in every
// mode: a Redis that requires AUTH works, and the password shows in no log
// line. Without the password the app refuses to start, saying why.
func TestRedisURLWithAuth(t *testing.T) {
	t.Parallel() // servers of its own
	redistest.Require(t)
	const password = "s3cret-pass-for-the-app"
	t.Run("single", func(t *testing.T) {
		srv := redistest.Start(t)
		requirePass(t, srv, "default", password)
		cfg := testConfig(t)
		env := map[string]string{"REDIS_ADDR": "redis://:" + password + "@" + srv.Addr() + "/0"}
		loaded, err := loadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		cfg.RedisAddrs, cfg.RedisMode = loaded.RedisAddrs, loaded.RedisMode
		logs := &syncBuffer{}
		_, ts := startAppLogged(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
		payOnce(t, ts.Client(), ts.URL)
		if strings.Contains(logs.String(), password) || !strings.Contains(logs.String(), `"auth":true`) {
			t.Fatalf("the log: want it to say auth is on, and never the password:\n%s", logs)
		}

		cfg.RedisAddrs = []string{srv.Addr()}
		if _, err := newApp(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("without the password: got %v, want the app to refuse to start with NOAUTH", err)
		}
	})
	t.Run("redlock", func(t *testing.T) {
		cfg, srvs := redlockConfig(t, true)
		for i, srv := range srvs {
			user := fmt.Sprintf("node%d", i) // each node its own user
			requirePass(t, srv, user, password+user)
			cfg.RedisAddrs[i] = "redis://" + user + ":" + password + user + "@" + srv.Addr()
		}
		logs := &syncBuffer{}
		_, ts := startAppLogged(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
		payOnce(t, ts.Client(), ts.URL)
		if strings.Contains(logs.String(), password) || !strings.Contains(logs.String(), srvs[2].Addr()) {
			t.Fatalf("the log: want the nodes' addresses, and never a password:\n%s", logs)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3)
		cfg := testConfig(t)
		cfg.RedisMode = modeCluster
		cfg.RedisAddrs = nil
		for _, n := range cluster.Nodes() {
			requirePass(t, n, "default", password)
			cfg.RedisAddrs = append(cfg.RedisAddrs, "redis://:"+password+"@"+n.Addr())
		}
		_, ts := startApp(t, cfg)
		payOnce(t, ts.Client(), ts.URL)
	})
}

// The embedded Redis listens on loopback, which every user of the machine
// reaches: a client without the password the app made at start is
// refused, and the app itself works.
func TestEmbeddedRedisNeedsPassword(t *testing.T) {
	cfg := testConfig(t)
	cfg.RedisAddrs, cfg.RedisMode = nil, modeEmbedded
	logs := &syncBuffer{}
	a, ts := startAppLogged(t, cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	payOnce(t, ts.Client(), ts.URL)

	stranger := redis.NewClient(&redis.Options{Addr: a.backend.embed.addr(), MaxRetries: -1})
	defer stranger.Close()
	ctx := context.Background()
	for _, cmd := range []*redis.StatusCmd{stranger.Ping(ctx), stranger.Set(ctx, "x", "1", 0)} {
		if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("%v without the password: got %v, want NOAUTH", cmd.Args(), err)
		}
	}
	guess := redis.NewClient(&redis.Options{Addr: a.backend.embed.addr(), Password: "guess", MaxRetries: -1})
	defer guess.Close()
	if err := guess.Ping(ctx).Err(); err == nil {
		t.Fatal("PING with a wrong password: got nil, want an error")
	}
	if strings.Contains(logs.String(), a.backend.embed.password) {
		t.Fatalf("the log shows the embedded Redis's password:\n%s", logs)
	}
}

// Each REDIS_ADDR entry is host:port or a redis:// or rediss:// URL; a
// bad one is refused at start, naming the variable and never quoting a
// password.
func TestRedisURLConfig(t *testing.T) {
	for _, tc := range []struct {
		name, addr, mode string
		check            func(t *testing.T, cfg config)
		wantErr          string
	}{
		{name: "host:port", addr: "localhost:6379", check: func(t *testing.T, cfg config) {
			o, _ := nodeOptions(cfg.RedisAddrs[0])
			if o.Addr != "localhost:6379" || o.Password != "" || o.TLSConfig != nil {
				t.Fatalf("got %+v", o)
			}
		}},
		{name: "URL with AUTH", addr: "redis://app:pw@10.0.0.1:6380/2", check: func(t *testing.T, cfg config) {
			o, _ := nodeOptions(cfg.RedisAddrs[0])
			if cfg.RedisMode != modeSingle || o.Addr != "10.0.0.1:6380" || o.Username != "app" || o.Password != "pw" || o.DB != 2 || o.TLSConfig != nil {
				t.Fatalf("got %s, %+v", cfg.RedisMode, o)
			}
		}},
		{name: "rediss is TLS", addr: "rediss://:pw@redis.internal:6380", check: func(t *testing.T, cfg config) {
			o, _ := nodeOptions(cfg.RedisAddrs[0])
			if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.internal" || o.Password != "pw" {
				t.Fatalf("got %+v, want TLS to redis.internal", o)
			}
		}},
		{name: "a redlock list of URLs", addr: "rediss://:a@n1:6379, redis://:b@n2:6379,n3:6379", check: func(t *testing.T, cfg config) {
			if cfg.RedisMode != modeRedlock || len(cfg.RedisAddrs) != 3 {
				t.Fatalf("got %s %q", cfg.RedisMode, cfg.RedisAddrs)
			}
		}},
		{name: "cluster of URLs", addr: "rediss://:pw@n1:6379,rediss://:pw@n2:6379", mode: "cluster", check: func(t *testing.T, cfg config) {
			o, err := clusterOptions(cfg.RedisAddrs)
			if err != nil || o.Password != "pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "" || len(o.Addrs) != 2 || o.Addrs[1] != "n2:6379" {
				t.Fatalf("got %+v, %v; want both seeds, the password and TLS checked against each node's own host", o, err)
			}
		}},
		{name: "cluster URLs disagree", addr: "redis://:pw1@n1:6379,redis://:pw2@n2:6379", mode: "cluster", wantErr: "REDIS_ADDR: redis://***@n2:6379: the URLs of a Cluster's nodes must share"},
		{name: "cluster database", addr: "redis://n1:6379/3", mode: "cluster", wantErr: "REDIS_ADDR: redis://n1:6379/3: a Cluster has database 0 only"},
		{name: "another scheme", addr: "http://localhost:6379", wantErr: `REDIS_ADDR: a URL of scheme "http", want redis:// or rediss://`},
		{name: "bad URL keeps its password", addr: "redis://user:topsecret@host:port:x", wantErr: "REDIS_ADDR: redis://***@host:port:x is not a valid Redis URL"},
		{name: "credentials without a scheme", addr: "app:topsecret@host:6379", wantErr: `REDIS_ADDR: "***@host:6379" is not host:port; a user and password go in a URL`},
		{name: "bad option", addr: "redis://:topsecret@host:6379?dial_timeout=soon", wantErr: "REDIS_ADDR: redis://***@host:6379?dial_timeout=soon is not a valid Redis URL: redis: invalid dial_timeout duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"REDIS_ADDR": tc.addr, "REDIS_MODE": tc.mode}
			cfg, err := loadConfig(func(k string) string { return env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "topsecret") {
					t.Fatalf("got %v, want an error starting %q, without the password", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

// Every client the app makes carries deadlines to the socket
// (ContextTimeoutEnabled), in every mode, so that a Redis that hangs
// cannot hold a request past its lock's wait: a URL cannot set it.
func TestClientsKeepDeadlines(t *testing.T) {
	for _, entry := range []string{"localhost:6379", "redis://app:secret@localhost:6379/0?read_timeout=10s", "rediss://localhost:6380"} {
		o, err := nodeOptions(entry)
		if err != nil || !o.ContextTimeoutEnabled {
			t.Errorf("nodeOptions(%s): got %v, ContextTimeoutEnabled %v; want it set", redactURL(entry), err, o != nil && o.ContextTimeoutEnabled)
		}
	}
	if co, err := clusterOptions([]string{"a:1", "b:2"}); err != nil || !co.ContextTimeoutEnabled {
		t.Errorf("clusterOptions: got %v, want ContextTimeoutEnabled", err)
	}
	for _, mode := range []string{modeSingle, modeEmbedded} {
		cfg := testConfig(t)
		if mode == modeEmbedded {
			cfg.RedisMode, cfg.RedisAddrs = modeEmbedded, nil
		}
		a, _ := startApp(t, cfg)
		if c := a.backend.nodes[0].(*redis.Client); !c.Options().ContextTimeoutEnabled {
			t.Errorf("%s: the app's client has no ContextTimeoutEnabled", mode)
		}
	}
}
