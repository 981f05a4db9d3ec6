package grpcapi

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine/objcache"
)

// notifier pokes subscribers when a Workspace they care about changes. A poke carries no
// state: the subscriber re-reads the cache, which is the truth, so a burst of changes
// collapses into one look and nothing is ever out of order.
type notifier struct {
	mu   sync.Mutex
	next int
	subs map[int]*subscription
}

type subscription struct {
	match func(*infrav1alpha1.Workspace) bool
	poke  chan struct{}
}

func newNotifier() *notifier {
	return &notifier{subs: map[int]*subscription{}}
}

// subscribe registers interest; call the returned function to stop.
func (n *notifier) subscribe(match func(*infrav1alpha1.Workspace) bool) (<-chan struct{}, func()) {
	s := &subscription{match: match, poke: make(chan struct{}, 1)}
	n.mu.Lock()
	id := n.next
	n.next++
	n.subs[id] = s
	n.mu.Unlock()
	return s.poke, func() {
		n.mu.Lock()
		delete(n.subs, id)
		n.mu.Unlock()
	}
}

func (n *notifier) notify(obj any) {
	if n.idle() {
		return
	}
	u, ok := objcache.AsUnstructured(obj)
	if !ok {
		return
	}
	// A Workspace that does not decode is nothing any subscriber can read.
	ws := &infrav1alpha1.Workspace{}
	if decodeInto(u, ws) != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.subs {
		if s.match(ws) {
			select {
			case s.poke <- struct{}{}:
			default: // a poke is already pending
			}
		}
	}
}

// idle reports whether no one is subscribed, so that an event need not be decoded.
func (n *notifier) idle() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.subs) == 0
}

// handler is the informer event handler that feeds the notifier.
func (n *notifier) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    n.notify,
		UpdateFunc: func(_, obj any) { n.notify(obj) },
		DeleteFunc: n.notify,
	}
}
