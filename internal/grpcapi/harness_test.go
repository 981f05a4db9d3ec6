package grpcapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/access"
)

// testAPI is the whole server, started as the manager starts it, on 127.0.0.1, over a fake
// API server that knows alice (a-token) and bob (b-token).
type testAPI struct {
	addr string
	// legacyAddr is the legacy listener's, when the test's Config turns it on.
	legacyAddr string
	s          *Server
}

func startTestAPI(t *testing.T, objs []client.Object, edits ...func(*Config)) *testAPI {
	t.Helper()
	cfg := testSettings(t, edits...)
	cfg.AccessKey = make([]byte, access.KeyBytes)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "tokens"},
		Data: map[string][]byte{"alice": []byte("a-token"), "bob": []byte("b-token")}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(objs, secret)...).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	w := newWorkspaces(c, c, c, newNotifier(), cfg, newQuotaLock(c, c, "ops"))
	s := newServer(cfg, newTestStore(c, time.Now), w)
	s.stopTimeout = time.Second
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var legacy net.Listener
	if cfg.Legacy.Enabled() {
		if legacy, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, lis, legacy) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	api := &testAPI{addr: lis.Addr().String(), s: s}
	if legacy != nil {
		api.legacyAddr = legacy.Addr().String()
	}
	return api
}

// testSettings are what New makes of DefaultConfig with edits, but for the Workspace kind,
// which a test sets when it needs it.
func testSettings(t testing.TB, edits ...func(*Config)) *settings {
	t.Helper()
	cfg := DefaultConfig()
	for _, edit := range edits {
		edit(&cfg)
	}
	s, err := newSettings(cfg, WorkspaceKind{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inIDEs serves the namespace ides alone.
func inIDEs(c *Config) { c.Namespaces = "ides" }

// client is a gRPC client that trusts whatever certificate the server shows.
func (a *testAPI) client(t *testing.T) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// as is ctx carrying user's token.
func as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// rawH2 is an HTTP/2 connection driven frame by frame, as an attacker would, ignoring what the
// server asks of it.
type rawH2 struct {
	conn *tls.Conn
	fr   *http2.Framer
}

func dialH2(t *testing.T, addr string) (*rawH2, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	fr := http2.NewFramer(conn, conn)
	fr.SetMaxReadFrameSize(1 << 20)
	if err := fr.WriteSettings(); err != nil {
		return nil, err
	}
	return &rawH2{conn: conn, fr: fr}, nil
}

// headers opens stream id on a gRPC method with the given extra fields, ending the stream if
// end; the block is cut into frames of at most 16 KiB, as HTTP/2 allows by default.
func (h *rawH2) headers(t *testing.T, id uint32, method string, end bool, extra ...string) {
	t.Helper()
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	fields := []string{":method", "POST", ":scheme", "https", ":path", method, ":authority", "localhost",
		"content-type", "application/grpc", "te", "trailers"}
	fields = append(fields, extra...)
	for i := 0; i < len(fields); i += 2 {
		if err := enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	block := buf.Bytes()
	first := min(len(block), 16<<10)
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:first],
		EndStream: end, EndHeaders: first == len(block)}); err != nil {
		t.Fatalf("writing headers: %v", err)
	}
	for rest := block[first:]; len(rest) > 0; {
		n := min(len(rest), 16<<10)
		if err := h.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return // the server may close the connection before it has it all
		}
		rest = rest[n:]
	}
}

// emptyRequest sends an empty message on stream id and ends it.
func (h *rawH2) emptyRequest(id uint32) {
	_ = h.fr.WriteData(id, true, []byte{0, 0, 0, 0, 0}) // uncompressed, zero bytes long
}

// until reads frames until match is true of one, the connection ends (nil, err) or the
// deadline passes (nil, timeout error).
func (h *rawH2) until(d time.Duration, match func(http2.Frame) bool) (http2.Frame, error) {
	_ = h.conn.SetReadDeadline(time.Now().Add(d))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if match(f) {
			return f, nil
		}
	}
}

// eventually waits until cond holds, checking every 100ms, and fails t after d. (The suites'
// framework.WaitFor lives in the test module, which this package's tests cannot import.)
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: not within %s", what, d)
	}
}
