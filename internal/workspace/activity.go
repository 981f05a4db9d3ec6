package workspace

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Activity records, for each workspace by UID, when it was last used and when the operator
// last read its IDE's own account of that: the idle policy stops only a workspace whose IDE
// was read recently and says it is unused, never one whose activity is unknown (an IDE the
// operator cannot reach). The operator's probe of the IDE and the workspace API's calls on a
// workspace write it; the Workspace lifecycle reads it.
type Activity struct {
	mu   sync.Mutex
	seen map[types.UID]Use
}

// Use is what is known of one workspace's use.
type Use struct {
	// Last is when it was last used: an editor or terminal session's heartbeat, or a call.
	Last time.Time
	// Read is when its IDE last answered the operator's probe; zero when it never did.
	Read time.Time
}

// NewActivity is an empty record.
func NewActivity() *Activity { return &Activity{seen: map[types.UID]Use{}} }

// Used records a use of the workspace at, unless a later one is known.
func (a *Activity) Used(uid types.UID, at time.Time) {
	a.update(uid, func(u *Use) {
		if at.After(u.Last) {
			u.Last = at
		}
	})
}

// Read records that the workspace's IDE answered at, saying it was last used at last (zero:
// never since it started).
func (a *Activity) Read(uid types.UID, at, last time.Time) {
	a.update(uid, func(u *Use) {
		u.Read = at
		if last.After(u.Last) {
			u.Last = last
		}
	})
}

// Of is what is known of the workspace's use.
func (a *Activity) Of(uid types.UID) Use {
	if a == nil {
		return Use{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[uid]
}

// Keep forgets every workspace but those keep reports.
func (a *Activity) Keep(keep func(types.UID) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid := range a.seen {
		if !keep(uid) {
			delete(a.seen, uid)
		}
	}
}

func (a *Activity) update(uid types.UID, f func(*Use)) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.seen[uid]
	f(&u)
	a.seen[uid] = u
}
