package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often WaitFor checks.
const PollInterval = 100 * time.Millisecond

// WaitFor polls check until it returns nil and fails t after timeout with what was awaited
// and check's last error, once each of onFailure has run (to log what explains the failure).
// It returns how long it waited. Every suite's wait goes through it: a wait is on a condition
// with a deadline, never a sleep.
func WaitFor(t testing.TB, timeout time.Duration, what string, check func(context.Context) error, onFailure ...func()) time.Duration {
	t.Helper()
	var last error
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		// A check cut off by the deadline (or by a client's rate limiter, which refuses to
		// wait past it) says less than the one before it.
		if err == nil || last == nil || !cutOff(ctx, err) {
			last = err
		}
		return err == nil, nil
	})
	if err != nil {
		for _, f := range onFailure {
			f()
		}
		t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
	return time.Since(start)
}

// cutOff reports whether err is the deadline's rather than the check's: the context ended, or
// client-go's rate limiter would not wait past the deadline (its error does not wrap one).
func cutOff(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline")
}
