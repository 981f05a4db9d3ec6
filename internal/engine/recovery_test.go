package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	gr := schema.GroupResource{Resource: "daemonsets"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("applying DaemonSet x: %w", refused), true},
		{apierrors.NewServiceUnavailable("etcd is down"), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{fmt.Errorf("reading: %w", context.DeadlineExceeded), true},
		{apierrors.NewConflict(gr, "x", errors.New("changed")), false},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "DaemonSet"}, "x", nil), false},
		{errors.New("chart does not render"), false},
	} {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRetryBackOffIsBounded: a resource failing again and again waits no longer than the cap,
// and failures of many resources do not slow each other down.
func TestRetryBackOffIsBounded(t *testing.T) {
	rl := rateLimiter(3 * time.Second)
	one := reconcile.Request{NamespacedName: types.NamespacedName{Name: "one"}}
	var last time.Duration
	for range 30 {
		last = rl.When(one)
	}
	if last != 3*time.Second {
		t.Errorf("after 30 failures: %s, want the 3s cap", last)
	}
	for i := range 500 {
		if d := rl.When(reconcile.Request{NamespacedName: types.NamespacedName{Name: fmt.Sprint(i)}}); d > 10*time.Millisecond {
			t.Fatalf("the first failure of resource %d waits %s: a shared bucket slows a burst", i, d)
		}
	}
}
