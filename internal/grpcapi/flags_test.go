package grpcapi

import (
	"flag"
	"reflect"
	"testing"
	"time"
)

// applied is defaultConfig with o's server options applied.
func applied(t *testing.T, o Options) *config {
	t.Helper()
	cfg := defaultConfig()
	for _, opt := range o.ServerOptions() {
		if err := opt(cfg); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// TestNewOptionsAreTheDefaults: the flags' defaults are the API's own, but for the address.
func TestNewOptionsAreTheDefaults(t *testing.T) {
	o := NewOptions()
	if o.Enabled() {
		t.Errorf("the API is on by default at %q", o.Address)
	}
	o.Address = defaultConfig().address
	if got, want := applied(t, o), defaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("NewOptions applied = %+v, want the defaults %+v", got, want)
	}
}

func TestBindFlags(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--grpc-bind-address=:9443", "--grpc-token-secret=ops/tokens",
		"--workspace-namespaces=a, b", "--quota-write-burst=3", "--grpc-max-connection-age-grace=1m"}); err != nil {
		t.Fatal(err)
	}
	cfg := applied(t, o)
	if !o.Enabled() || cfg.address != ":9443" || cfg.tokens.String() != "ops/tokens" || !reflect.DeepEqual(cfg.namespaces, []string{"a", "b"}) ||
		cfg.user.mutationBurst != 3 || cfg.conn.maxAgeGrace != time.Minute {
		t.Errorf("config from the flags = %+v", cfg)
	}
	o.TokenSecret = "no-slash"
	for _, opt := range o.ServerOptions() {
		if err := opt(defaultConfig()); err != nil {
			return
		}
	}
	t.Error("a token Secret that is not namespace/name was accepted")
}
