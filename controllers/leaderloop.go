package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// leaderLoop runs run every interval on the leader only (the activity record and the deletes
// are the leader's), until the manager stops; what names its work in the log when it fails.
// The activity probes, the kept volume review and the stale reaper are such loops
// (leaderLoops): the work the kinds do on a clock rather than on a change the engine
// reconciles.
type leaderLoop struct {
	what     string
	interval time.Duration
	run      func(context.Context) error
}

func (leaderLoop) NeedLeaderElection() bool { return true }

func (l leaderLoop) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := l.run(ctx); err != nil {
			log.FromContext(ctx).Error(err, l.what)
		}
	}, l.interval)
	return nil
}

// inParallel runs each job, at most limit at a time, and returns when all have.
func inParallel(limit int, jobs []func()) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, limit)
	for _, job := range jobs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			job()
		})
	}
	wg.Wait()
}
