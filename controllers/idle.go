package controllers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// DefaultIdleWarning is how long before an idle stop a workspace or a VM says it is coming.
const DefaultIdleWarning = 5 * time.Minute

// idlePolicy is what decides a running resource's idle stop, a workspace's or a VM's: the
// operator's timeout, warning and reading interval, and what is known of the resource's use.
type idlePolicy struct {
	timeout, warning, interval time.Duration
	use                        activity.Use
}

// readingMaxAge is how old a reading of a resource's activity (its IDE's, its launcher's) may
// be and still count: older, its use is unknown.
func (p idlePolicy) readingMaxAge() time.Duration {
	return 3 * activityInterval(p.interval)
}

// timeoutFor is the idle timeout of a resource whose spec asks for own: the shorter of its own
// and the operator's, either when the other is unset; 0 when neither is (no idle stop).
func (p idlePolicy) timeoutFor(own *metav1.Duration) time.Duration {
	if own == nil || own.Duration <= 0 || (p.timeout > 0 && p.timeout < own.Duration) {
		return p.timeout
	}
	return own.Duration
}

// idleVerdict is what the idle policy makes of a running resource: stop it, or warn that it
// stops at stopAt; message is the status message that says so. The zero verdict leaves it be.
type idleVerdict struct {
	stop    bool
	stopAt  *metav1.Time
	message string
}

// verdict applies the idle policy to a running resource whose spec asks for own, running since
// startedAt, and warned by its last status that it stops at warned (nil: not warned); kept says
// what a stop keeps ("the storage is kept"). Unused for its timeout, it is to stop; within the
// warning before that, stopAt says when. Its idle time counts from its last use or, when none
// was seen since it started, from its start. Each step needs a reading of its activity taken
// since that step's time that still shows no use (a reading from before, with a session opened
// since, must not warn of a stop). A stop keeps the warning's word: it comes no earlier than
// the time the warning gave, which is always after the warning, so that a reading taken after
// the warning decides it. A resource whose reading came only after its stop time is warned now
// and stopped at the next reading that still shows no use (measured on the real cluster: such a
// VM was warned and stopped in the same second, on the same reading).
func (p idlePolicy) verdict(own *metav1.Duration, startedAt *metav1.Time, warned *metav1.Time, now time.Time, kept string) idleVerdict {
	at, warnAt, ok := p.idleTimes(own, startedAt, now)
	if !ok || now.Before(warnAt) || p.use.Read.Before(warnAt) {
		return idleVerdict{}
	}
	stopAt := latest(at, now.Add(time.Second))
	if warned != nil {
		stopAt = latest(at, warned.Time)
	}
	if warned == nil || now.Before(stopAt) || p.use.Read.Before(stopAt) {
		t := metav1.NewTime(stopAt.Truncate(time.Second))
		return idleVerdict{stopAt: &t, message: fmt.Sprintf("unused since %s: stops at %s unless used before; %s",
			at.Add(-p.timeoutFor(own)).UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339), kept)}
	}
	return idleVerdict{stop: true, message: fmt.Sprintf("stopped after %s unused; %s", p.timeoutFor(own), kept)}
}

// idleTimes are when a running resource is to be stopped for being unused and warned of it;
// ok is false when no idle stop applies (no timeout, or its use unknown).
func (p idlePolicy) idleTimes(own *metav1.Duration, startedAt *metav1.Time, now time.Time) (stopAt, warnAt time.Time, ok bool) {
	timeout := p.timeoutFor(own)
	if timeout <= 0 || startedAt == nil || now.Sub(p.use.Read) > p.readingMaxAge() {
		return time.Time{}, time.Time{}, false
	}
	last := startedAt.Time
	if p.use.Last.After(last) {
		last = p.use.Last
	}
	stopAt = last.Add(timeout)
	return stopAt, stopAt.Add(-min(p.warning, timeout/2)), true
}

// untilCheck is how long until a resource's idle status may change: its warning, its stop, or
// (in the warning, or of unknown use) the next reading of its activity. 0 when it is not
// running or no idle stop applies.
func (p idlePolicy) untilCheck(running bool, own *metav1.Duration, startedAt *metav1.Time, now time.Time) time.Duration {
	if !running || p.timeoutFor(own) <= 0 {
		return 0
	}
	stopAt, warnAt, ok := p.idleTimes(own, startedAt, now)
	switch {
	case !ok || !now.Before(warnAt):
		return activityInterval(p.interval)
	default:
		return min(max(warnAt.Sub(now), time.Second), max(stopAt.Sub(now), time.Second))
	}
}

// noticeStop adds to res what a new status that stops its resource, or warns of an idle stop,
// brings: an event saying message and, for a stop by the operator made just now (stoppedNow:
// for being unused, or after failed starts), a prompt write and a look again in a second, when
// the next render, once the status is written, halts what runs. It reports whether it added
// anything: a kind's own notices come after these.
func noticeStop(res *engine.StatusResult, stoppedNow bool, idleStopAt *metav1.Time, message string) bool {
	switch {
	case stoppedNow:
		res.RequeueAfter, res.Prompt = time.Second, true
		res.Notice = engine.Notice{Reason: infrav1alpha1.EventStoppedByOperator, Message: message}
	case idleStopAt != nil:
		res.Notice = engine.Notice{Reason: infrav1alpha1.EventIdleWarning, Message: message}
	default:
		return false
	}
	return true
}
