package realcluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Dialer opens connections from inside the network namespace of process PID (the holder's),
// from a process that stays in the host's: what the forwarder and the tests use to reach the
// node's addresses (NodeIP, ClusterIPs through kube-proxy's rules, the node's loopback).
type Dialer struct{ PID int }

// DialContext connects as net.Dialer does, with the socket made in the node's namespace. The
// goroutine's thread enters the namespace only for the socket's creation; Go starts new threads
// from a clean template thread while one is locked, so no other goroutine ever runs there.
func (d Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := d.dialInside(ctx, network, addr)
		if restored {
			runtime.UnlockOSThread()
		} // else the thread ends with this goroutine, taking the foreign namespace with it
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

func (d Dialer) dialInside(ctx context.Context, network, addr string) (net.Conn, bool, error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", d.PID))
	if err != nil {
		return nil, true, fmt.Errorf("the node's network namespace (holder %d): %w", d.PID, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("entering the node's network namespace: %w", err)
	}
	var nd net.Dialer
	conn, dialErr := nd.DialContext(ctx, network, addr)
	restored := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil
	return conn, restored, dialErr
}

// Forward serves each "listen=target" pair: a listener on the host (listen, on 127.0.0.1)
// whose connections are joined to target inside the node's network namespace. It returns when
// ctx ends or a listener fails.
func Forward(ctx context.Context, d Dialer, pairs []string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(pairs))
	for _, p := range pairs {
		listen, target, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("%q: want listen=target", p)
		}
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", listen)
		if err != nil {
			return err
		}
		context.AfterFunc(ctx, func() { l.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- serve(ctx, l, d, target)
		}()
	}
	wg.Wait()
	close(errs)
	if ctx.Err() != nil {
		return nil
	}
	return <-errs
}

func serve(ctx context.Context, l net.Listener, d Dialer, target string) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			up, err := d.DialContext(ctx, "tcp", target)
			if err != nil {
				log.Printf("forward %s -> %s: %v", l.Addr(), target, err)
				return
			}
			defer up.Close()
			join(c, up)
		}()
	}
}

// join copies both ways until either side ends, then closes both.
func join(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	<-done
	<-done
}
