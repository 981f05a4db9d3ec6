// Package activity records when each Workspace or VirtualMachine was last used, for the idle
// policies: what the operator's probes read from the IDE or the VM's launcher, and the calls the
// workspace API makes on a workspace.
package activity

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Record holds, for each resource by UID, when it was last used and when the operator last read
// the resource's own account of that (the IDE's, the VM launcher's): an idle policy stops only
// a resource that was read recently and says it is unused, never one whose activity is unknown
// (one the operator cannot reach). The operator's probes and the workspace API's calls write
// it; the lifecycles read it.
type Record struct {
	mu   sync.Mutex
	seen map[types.UID]Use
}

// Use is what is known of one resource's use.
type Use struct {
	// Last is when it was last used: an editor or terminal session's heartbeat, or a call.
	Last time.Time
	// Read is when its IDE last answered the operator's probe; zero when it never did.
	Read time.Time
}

// New is an empty record.
func New() *Record { return &Record{seen: map[types.UID]Use{}} }

// Used records a use of the resource at, unless a later one is known.
func (a *Record) Used(uid types.UID, at time.Time) {
	a.update(uid, func(u *Use) {
		if at.After(u.Last) {
			u.Last = at
		}
	})
}

// Read records that the resource answered the probe at, saying it was last used at last (zero:
// never since it started).
func (a *Record) Read(uid types.UID, at, last time.Time) {
	a.update(uid, func(u *Use) {
		u.Read = at
		if last.After(u.Last) {
			u.Last = last
		}
	})
}

// Of is what is known of the resource's use.
func (a *Record) Of(uid types.UID) Use {
	if a == nil {
		return Use{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[uid]
}

// Keep forgets every resource but those keep reports.
func (a *Record) Keep(keep func(types.UID) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid := range a.seen {
		if !keep(uid) {
			delete(a.seen, uid)
		}
	}
}

func (a *Record) update(uid types.UID, f func(*Use)) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.seen[uid]
	f(&u)
	a.seen[uid] = u
}
