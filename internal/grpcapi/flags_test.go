package grpcapi

import (
	"flag"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDefaultConfig: the API is off by default, its defaults are valid, and they are the
// flags' defaults.
func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Enabled() {
		t.Errorf("the API is on by default at %q", cfg.Address)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults are not valid: %v", err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("the flags' defaults = %+v, want the defaults %+v", cfg, want)
	}
}

func TestBindFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.BindFlags(fs)
	if err := fs.Parse([]string{"--grpc-bind-address=:9443", "--grpc-token-secret=ops/tokens",
		"--workspace-namespaces=a, b", "--quota-write-burst=3", "--grpc-max-connection-age-grace=1m"}); err != nil {
		t.Fatal(err)
	}
	set, err := newSettings(cfg, WorkspaceKind{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Enabled() || set.Address != ":9443" || set.tokenSecret.String() != "ops/tokens" || !reflect.DeepEqual(set.servedNamespaces, []string{"a", "b"}) ||
		set.Quota.WriteBurst != 3 || set.ageGrace() != time.Minute {
		t.Errorf("settings from the flags = %+v", set)
	}
	cfg.Tokens.Secret = "no-slash"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--grpc-token-secret") {
		t.Errorf("a token Secret that is not namespace/name: %v, want an error naming the flag", err)
	}
}

// flagInError is a flag an error names.
var flagInError = regexp.MustCompile(`--([a-z-]+)`)

// TestValidateNamesTheFlag: every setting the API cannot run with is refused, saying which
// flag, and with others wrong all are said at once.
func TestValidateNamesTheFlag(t *testing.T) {
	cases := map[string]func(*Config){
		"grpc-max-connections":            func(c *Config) { c.Conn.MaxConnections = 0 },
		"grpc-max-streams-per-connection": func(c *Config) { c.Conn.MaxStreamsPerConnection = 0 },
		"grpc-max-header-bytes":           func(c *Config) { c.Conn.MaxHeaderBytes = 1 << 20 },
		"grpc-handshake-timeout":          func(c *Config) { c.Conn.HandshakeTimeout = 0 },
		"grpc-idle-timeout":               func(c *Config) { c.Conn.IdleTimeout = -time.Second },
		"grpc-max-connection-age":         func(c *Config) { c.Conn.MaxConnectionAge = 0 },
		"grpc-max-connection-age-grace":   func(c *Config) { c.Conn.MaxConnectionAgeGrace = -time.Second },
		"grpc-max-wait":                   func(c *Config) { c.MaxWait = 0 },
		"grpc-tls-reload-interval":        func(c *Config) { c.TLS.ReloadInterval = 0 },
		"grpc-tls-key-file":               func(c *Config) { c.TLS.CertFile = "tls.crt" },
		"grpc-token-secret":               func(c *Config) { c.Tokens.Secret = "ops/" },
		"grpc-token-max-staleness":        func(c *Config) { c.Tokens.MaxStaleness = time.Second },
		"workspace-namespaces":            func(c *Config) { c.Namespaces = " , " },
		"quota-max-workspaces":            func(c *Config) { c.Quota.MaxWorkspaces = 0 },
		"quota-max-running":               func(c *Config) { c.Quota.MaxRunning = 0 },
		"quota-max-retained-volumes":      func(c *Config) { c.Quota.MaxRetainedVolumes = -1 },
		"quota-max-storage":               func(c *Config) { c.Quota.MaxStorage = "lots" },
		"quota-max-watches":               func(c *Config) { c.Quota.MaxWatches = 0 },
		"quota-max-calls-in-flight":       func(c *Config) { c.Quota.MaxCallsInFlight = c.Quota.MaxWatches },
		"quota-writes-per-minute":         func(c *Config) { c.Quota.WritesPerMinute = 0 },
		"quota-write-burst":               func(c *Config) { c.Quota.WriteBurst = 0 },
		"grpc-legacy-user":                func(c *Config) { c.Legacy.Address = "127.0.0.1:9000" },
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	all := DefaultConfig()
	all.BindFlags(fs)
	for name, edit := range cases {
		cfg := DefaultConfig()
		edit(&cfg)
		edit(&all)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "--"+name) {
			t.Errorf("--%s: %v, want an error naming it", name, err)
			continue
		}
		for _, m := range flagInError.FindAllStringSubmatch(err.Error(), -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("--%s: the error %q names --%s, which is no flag", name, err, m[1])
			}
		}
	}
	if err := all.Validate(); err == nil || strings.Count(err.Error(), "\n")+1 < len(cases)-1 {
		t.Errorf("every setting wrong: %v, want an error for each", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestLegacyListenerSettings: the legacy listener is off by default, and on it needs a user
// that can own workspaces and a port of its own.
func TestLegacyListenerSettings(t *testing.T) {
	if DefaultConfig().Legacy.Enabled() {
		t.Error("the legacy listener is on by default")
	}
	cases := []struct {
		legacy  LegacyConfig
		wantErr string
	}{
		{LegacyConfig{Address: ":9000", User: "portal"}, ""},
		{LegacyConfig{Address: Off, User: ""}, ""},
		{LegacyConfig{Address: ":9000"}, "--grpc-legacy-user must name"},
		{LegacyConfig{Address: ":9000", User: "Portal"}, `--grpc-legacy-user "Portal"`},
		{LegacyConfig{Address: ":9000", User: "system:serviceaccount:web:portal"}, "--grpc-legacy-user"},
		{LegacyConfig{Address: ":9443", User: "portal"}, `--grpc-legacy-bind-address ":9443" is the API's own address`},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		cfg.Address, cfg.Legacy = ":9443", tc.legacy
		err := cfg.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: %v, want %q", tc.legacy, err, tc.wantErr)
		}
	}
}
