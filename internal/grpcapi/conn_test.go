package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func healthy(t *testing.T, a *testAPI) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(a.client(t)).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestConnectionsOverTheCapAreClosed: an attacker holding connections open gets no more than
// the cap; the one over it is closed before its handshake, and its place is free again once
// one of the others is closed.
func TestConnectionsOverTheCapAreClosed(t *testing.T) {
	a := startTestAPI(t, nil, func(c *Config) { c.Conn.MaxConnections = 3 })
	open, refused := apiConnections.WithLabelValues("api"), apiRefusals.WithLabelValues(limitConnections)
	before, refusals := testutil.ToFloat64(open), testutil.ToFloat64(refused)
	var held []*rawH2
	for range 3 {
		h, err := dialH2(t, a.addr)
		if err != nil {
			t.Fatalf("a connection under the cap: %v", err)
		}
		held = append(held, h)
	}
	eventually(t, 5*time.Second, "the metrics count the three connections held", func() bool {
		return testutil.ToFloat64(open) == before+3
	})
	if max := testutil.ToFloat64(apiConnectionsMax.WithLabelValues("api")); max != 3 {
		t.Errorf("cloudspace_api_connections_max = %v, want the cap, 3", max)
	}
	if h, err := dialH2(t, a.addr); err == nil {
		_, err = h.until(2*time.Second, func(http2.Frame) bool { return false })
		if !errors.Is(err, io.EOF) && !strings.Contains(fmt.Sprint(err), "reset") {
			t.Fatalf("the connection over the cap was served (read: %v)", err)
		}
	}
	if got := testutil.ToFloat64(refused); got != refusals+1 {
		t.Errorf("cloudspace_api_refusals_total{limit=%q} = %v, want %v", limitConnections, got, refusals+1)
	}
	_ = held[0].conn.Close()
	eventually(t, 5*time.Second, "a connection is served once one of those at the cap has closed", func() bool {
		return healthy(t, a) == nil
	})
}

// TestStalledHandshakesAreClosed: a connection that never says anything is closed after the
// handshake timeout, not held for gRPC's default two minutes.
func TestStalledHandshakesAreClosed(t *testing.T) {
	a := startTestAPI(t, nil, func(c *Config) { c.Conn.HandshakeTimeout = 300 * time.Millisecond })
	conn, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a connection that sent nothing was still open after 5s")
	}
}

// TestIdleConnectionsAreClosed: a connection with no call open is sent GOAWAY after the idle
// timeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	a := startTestAPI(t, nil, func(c *Config) { c.Conn.IdleTimeout = 300 * time.Millisecond })
	h, err := dialH2(t, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.until(5*time.Second, isGoAway); err != nil {
		t.Fatalf("an idle connection got no GOAWAY: %v", err)
	}
}

// TestStalledCallsDoNotHoldAConnectionForever: a call that never sends its request keeps the
// connection from being idle, but not past its maximum age and grace.
func TestStalledCallsDoNotHoldAConnectionForever(t *testing.T) {
	a := startTestAPI(t, nil, func(c *Config) {
		c.Conn.MaxConnectionAge, c.Conn.MaxConnectionAgeGrace = 300*time.Millisecond, 300*time.Millisecond
	})
	h, err := dialH2(t, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	h.headers(t, 1, "/grpc.health.v1.Health/Check", false)
	if _, err := h.until(5*time.Second, isGoAway); err != nil {
		t.Fatalf("a connection past its age got no GOAWAY: %v", err)
	}
	if _, err := h.until(5*time.Second, func(http2.Frame) bool { return false }); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a connection past its age and grace is still open")
	}
}

func isGoAway(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }

// TestStreamsPerConnectionAreCapped: the server announces the cap, and refuses a stream over
// it from a client that ignores the announcement.
func TestStreamsPerConnectionAreCapped(t *testing.T) {
	a := startTestAPI(t, nil, func(c *Config) { c.Conn.MaxStreamsPerConnection = 4 })
	h, err := dialH2(t, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.until(5*time.Second, func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && !s.IsAck() })
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := f.(*http2.SettingsFrame).Value(http2.SettingMaxConcurrentStreams); !ok || n != 4 {
		t.Errorf("the server announces %d streams per connection (set: %t), want 4", n, ok)
	}
	for id := uint32(1); id <= 9; id += 2 { // five calls that never send their request
		h.headers(t, id, "/grpc.health.v1.Health/Check", false)
	}
	rst, err := h.until(5*time.Second, func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok })
	if err != nil {
		t.Fatalf("the fifth stream was not refused: %v", err)
	}
	if r := rst.(*http2.RSTStreamFrame); r.StreamID != 9 || r.ErrCode != http2.ErrCodeRefusedStream {
		t.Errorf("got RST_STREAM %d %s, want the fifth stream (9) refused", r.StreamID, r.ErrCode)
	}
}

// TestOversizeMetadataIsRefused: a call with 1 MiB of metadata, sent by a client that ignores
// the server's announced limit, gets no answer but a refusal, and the server serves others.
func TestOversizeMetadataIsRefused(t *testing.T) {
	a := startTestAPI(t, nil)
	h, err := dialH2(t, a.addr)
	if err != nil {
		t.Fatal(err)
	}
	h.headers(t, 1, "/grpc.health.v1.Health/Check", false, "x-pad", strings.Repeat("a", 1<<20))
	h.emptyRequest(1)
	f, err := h.until(5*time.Second, func(f http2.Frame) bool {
		switch f.(type) {
		case *http2.HeadersFrame, *http2.RSTStreamFrame, *http2.GoAwayFrame:
			return true
		}
		return false
	})
	if _, answered := f.(*http2.HeadersFrame); answered || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("1 MiB of metadata was read and answered (%v, %v)", f, err)
	}
	if err := healthy(t, a); err != nil {
		t.Fatalf("the server no longer serves after refusing it: %v", err)
	}
}
