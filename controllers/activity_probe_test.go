package controllers

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/activity"
)

// listed is a client.Reader that lists items, whatever is asked.
type listed []unstructured.Unstructured

func (l listed) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return nil
}

func (l listed) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*unstructured.UnstructuredList).Items = append([]unstructured.Unstructured(nil), l...)
	return nil
}

// probed is a listed resource of the given UID in phase.
func probed(uid, phase string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"phase": phase}}}
	u.SetUID(types.UID(uid))
	return u
}

// TestAnActivityRoundEndsWithinItsInterval: a read that stalls is cut off when the round's
// interval is up, and the other resources are read all the same; a resource not selected is
// not read, and the use of one no longer listed is forgotten, of one listed kept. In a synctest
// bubble, time moves only when every read waits: the round takes exactly its interval.
func TestAnActivityRoundEndsWithinItsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		record := activity.New()
		record.Used("gone", time.Now())
		record.Used("stopped", time.Now())
		const interval = time.Minute
		read := func(ctx context.Context, obj *unstructured.Unstructured) {
			if obj.GetUID() == "stalls" {
				<-ctx.Done() // an IDE that accepts the connection and never answers
				return
			}
			record.Read(obj.GetUID(), time.Now(), time.Time{})
		}
		selected := func(obj *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
			return obj, inPhase(obj, "Running")
		}
		var items listed
		for _, uid := range []string{"a", "stalls", "b", "c", "d", "e", "f", "g", "h", "i"} {
			items = append(items, probed(uid, "Running"))
		}
		items = append(items, probed("stopped", "Stopped"))
		probe := newActivityProbe(items, record, interval, workspaceGVK, selected, read)

		start := time.Now()
		if err := probe.probeAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > interval {
			t.Errorf("the round took %s, more than its interval %s", took, interval)
		}
		for _, uid := range []types.UID{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
			if record.Of(uid).Read.IsZero() {
				t.Errorf("%s was not read: a stalled read cost it its reading", uid)
			}
		}
		if !record.Of("stalls").Read.IsZero() || !record.Of("stopped").Read.IsZero() {
			t.Error("a stalled read, or a resource not selected, counts as read")
		}
		if record.Of("gone") != (activity.Use{}) || record.Of("stopped").Last.IsZero() {
			t.Errorf("after the round: gone %+v, stopped %+v; want the gone one forgotten, the listed one kept",
				record.Of("gone"), record.Of("stopped"))
		}
	})
}
