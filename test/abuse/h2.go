package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The attacks in this file speak HTTP/2 by hand, as a hostile client does: grpc-go's client
// obeys the server's advertised limits, so it cannot show what the server does when they are
// ignored.

// dialH2 opens a TLS connection that negotiates h2 and sends the client preface and settings.
func (a *abuse) dialH2(ctx context.Context) (*tls.Conn, *http2.Framer, error) {
	d := tls.Dialer{Config: &tls.Config{RootCAs: a.roots, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}}
	c, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return nil, nil, err
	}
	conn := c.(*tls.Conn)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, nil, err
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, fr, nil
}

// connectionFlood opens connections that never authenticate, all at once, and counts how many
// the server still holds a moment after the last one opened.
func (a *abuse) connectionFlood(ctx context.Context) (string, string, error) {
	conns := make([]*tls.Conn, a.o.conns)
	var refused atomic.Int64
	parallelUntil(ctx, 64, a.o.conns, func(i int) {
		c, fr, err := a.dialH2(ctx)
		if err != nil {
			refused.Add(1)
			return
		}
		conns[i] = c
		// What a health check costs the server before any token is read: a stream.
		_ = writeCall(fr, 1, "/grpc.health.v1.Health/Check", nil)
	})
	defer closeAll(conns)
	var open atomic.Int64
	parallelUntil(ctx, 64, len(conns), func(i int) {
		if conns[i] != nil && stillOpen(conns[i]) {
			open.Add(1)
		}
	})
	held := int(open.Load())
	answer := fmt.Sprintf("held open %d, refused at dial %d, closed by the server %d", held, refused.Load(), a.o.conns-held-int(refused.Load()))
	through := ""
	if held == a.o.conns {
		through = "every connection was held"
	}
	return answer, through, nil
}

// stillOpen reports whether the server has not closed c: a read that times out found the
// connection open, one that fails found it closed (whatever frames came first are skipped).
func stillOpen(c *tls.Conn) bool {
	buf := make([]byte, 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err := c.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return true
		}
		if err != nil {
			return false
		}
	}
}

func closeAll(conns []*tls.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

// headerFlood sends calls whose metadata is far beyond any real call's, each on its own
// connection, all at once, and reports what each got back.
func (a *abuse) headerFlood(ctx context.Context) (string, string, error) {
	var mu sync.Mutex
	answers := map[string]int{}
	pad := strings.Repeat("x", a.o.headerMiB<<20)
	var wg sync.WaitGroup
	for range a.o.headerCalls {
		wg.Go(func() {
			got := a.oversizedCall(ctx, pad)
			mu.Lock()
			answers[got]++
			mu.Unlock()
		})
	}
	wg.Wait()
	var parts []string
	for got, n := range answers {
		parts = append(parts, fmt.Sprintf("%s %d", got, n))
	}
	through := ""
	if n := answers["served"]; n > 0 {
		through = fmt.Sprintf("%d calls were served", n)
	}
	return strings.Join(parts, ", "), through, nil
}

// oversizedCall makes one List call with pad as metadata and says how the server answered:
// served (a response with grpc-status 0), refused (a reset, a GOAWAY, a non-zero status) or
// closed (the connection ended).
func (a *abuse) oversizedCall(ctx context.Context, pad string) string {
	c, fr, err := a.dialH2(ctx)
	if err != nil {
		return "refused at dial"
	}
	defer c.Close()
	if err := writeCall(fr, 1, "/cloudspace.v1.WorkspaceService/List", map[string]string{
		"authorization": "Bearer " + a.tokens["user2"], "x-pad": pad,
	}); err != nil {
		return "closed while sending"
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return readAnswer(fr)
}

// writeCall opens stream id with a gRPC request's headers and an empty message.
func writeCall(fr *http2.Framer, id uint32, path string, extra map[string]string) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "https"}, {Name: ":path", Value: path},
		{Name: ":authority", Value: "cloudspace"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}
	for k, v := range extra {
		fields = append(fields, hpack.HeaderField{Name: k, Value: v})
	}
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			return err
		}
	}
	if err := writeBlock(fr, id, block.Bytes()); err != nil {
		return err
	}
	// An empty protobuf message: not compressed, length 0.
	return fr.WriteData(id, true, []byte{0, 0, 0, 0, 0})
}

// writeBlock writes a header block as HEADERS and CONTINUATION frames of the default size.
func writeBlock(fr *http2.Framer, id uint32, block []byte) error {
	const frame = 16384
	first := block[:min(frame, len(block))]
	rest := block[len(first):]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		chunk := rest[:min(frame, len(rest))]
		rest = rest[len(chunk):]
		if err := fr.WriteContinuation(id, len(rest) == 0, chunk); err != nil {
			return err
		}
	}
	return nil
}

// readAnswer reads frames until the call's outcome is known.
func readAnswer(fr *http2.Framer) string {
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed"
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return "refused (GOAWAY " + f.ErrCode.String() + ")"
		case *http2.RSTStreamFrame:
			return "refused (RST_STREAM " + f.ErrCode.String() + ")"
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				return "refused (HTTP " + s + ")"
			}
			if code := headerValue(f, "grpc-status"); code != "" {
				if code == "0" {
					return "served"
				}
				return "refused (grpc-status " + code + ")"
			}
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.RegularFields() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
