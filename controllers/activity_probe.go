package controllers

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// DefaultActivityInterval is how often the operator reads the activity of each running IDE and
// VM an idle stop applies to. One whose activity was last read more than three intervals ago
// is of unknown use, and not stopped (idlePolicy.readingMaxAge).
const DefaultActivityInterval = 30 * time.Second

// activityInterval is the reading interval of a kind whose settings ask for interval.
func activityInterval(interval time.Duration) time.Duration {
	return cmp.Or(interval, DefaultActivityInterval)
}

// probeParallelism is how many resources an activity probe reads at once.
const probeParallelism = 8

// activityProbe reads into the activity record, every interval on the leader (see leaderLoop),
// each running resource's own account of its use. The round is the same for every kind; a kind
// brings only what to list, which of the listed resources to read, and how to read one.
type activityProbe[T any] struct {
	reader   client.Reader
	record   *activity.Record
	interval time.Duration
	// kind is the kind of the resources read, listed as kind + "List".
	kind schema.GroupVersionKind
	// selected decodes a listed resource that is to be read (running, an idle stop applies to
	// it); false for the others.
	selected func(*unstructured.Unstructured) (T, bool)
	// read reads one resource's activity into the record; one that does not answer is left
	// unread, so that its use is unknown and it is not stopped.
	read func(context.Context, T)
}

// newActivityProbe is the probe of kind's resources every interval (DefaultActivityInterval
// when 0), reading those selected picks with read into record.
func newActivityProbe[T any](reader client.Reader, record *activity.Record, interval time.Duration, kind schema.GroupVersionKind,
	selected func(*unstructured.Unstructured) (T, bool), read func(context.Context, T)) *activityProbe[T] {
	return &activityProbe[T]{reader: reader, record: record, interval: activityInterval(interval),
		kind: kind, selected: selected, read: read}
}

// probeAll reads the activity of every selected resource, a few at a time, and forgets the
// resources that are gone.
func (p *activityProbe[T]) probeAll(ctx context.Context) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(p.kind.GroupVersion().WithKind(p.kind.Kind + "List"))
	if err := p.reader.List(ctx, list); err != nil {
		return fmt.Errorf("listing the %s resources: %w", p.kind.Kind, err)
	}
	// A round ends within its interval, its reads in a new order each time: a resource whose
	// read stalls (an IDE or a launcher that hangs) costs its own reading, its use unknown so
	// that it runs on, never the others theirs. Without the bound, enough stalled reads ahead
	// of them in the queue could age the others' readings past readingMaxAge; without the
	// shuffle, the same ones would be cut off every round. (The Workspace's probe gained both
	// when it came to share this loop with the VM's.)
	ctx, cancel := context.WithTimeout(ctx, p.interval)
	defer cancel()
	// Every resource there is keeps its use, read or not: a stopped workspace's API calls say
	// it is not stale.
	live := make(map[types.UID]bool, len(list.Items))
	var reads []func()
	for i := range list.Items {
		live[list.Items[i].GetUID()] = true
		if obj, ok := p.selected(&list.Items[i]); ok {
			reads = append(reads, func() { p.read(ctx, obj) })
		}
	}
	rand.Shuffle(len(reads), func(i, j int) { reads[i], reads[j] = reads[j], reads[i] })
	inParallel(probeParallelism, reads)
	p.record.Keep(func(uid types.UID) bool { return live[uid] })
	return nil
}

// inPhase reports whether obj's status.phase is phase: a probe looks at it before it decodes the
// whole object, which it does for the running ones alone.
func inPhase(obj *unstructured.Unstructured, phase string) bool {
	got, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	return got == phase
}
