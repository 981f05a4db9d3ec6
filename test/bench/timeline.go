package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// A stage is a moment in a workspace's start that the bench sees happen.
type stage int

const (
	stageWorkspace  stage = iota // the Workspace exists (the API's work)
	stageDeployment              // its Deployment exists (the operator's)
	stagePod                     // its pod exists (the cluster's controllers)
	stagePodReady                // its pod is ready (the scheduler and the kubelet)
	stageRunning                 // its status reads Running (the operator again)
	stages
)

var stageNames = [stages]string{"Workspace created", "Deployment created", "pod created", "pod ready", "status Running"}

// Timeline splits the create-and-wait latency into its stages: Steps[0] is from the call to the
// first stage, Steps[i] from stage i-1 to stage i, and the last from the last stage until the
// call returned.
type Timeline struct {
	Steps []Step `json:"steps"`
}

// Step is the latency of one step of the timeline.
type Step struct {
	Name    string  `json:"name"`
	Latency Latency `json:"latency"`
}

// timeline records when the bench first saw each workspace reach each stage.
type timeline struct {
	mu   sync.Mutex
	seen [stages]map[string]time.Time
}

// watchTimeline starts recording the workspaces of ns; stop ends it.
func (b *bench) watchTimeline(ctx context.Context, ns string) (*timeline, func(), error) {
	t := &timeline{}
	for i := range t.seen {
		t.seen[i] = map[string]time.Time{}
	}
	watches := map[client.Object]func(obj any){&corev1.Pod{}: t.pod, &infrav1alpha1.Workspace{}: t.workspace, &appsv1.Deployment{}: t.deployment}
	_, stop, err := b.startCache(ctx, ns, func(c cache.Cache) error {
		for obj, see := range watches {
			informer, err := c.GetInformer(ctx, obj)
			if err != nil {
				return err
			}
			handler := toolscache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}
			if _, err := informer.AddEventHandler(handler); err != nil {
				return err
			}
		}
		return nil
	})
	return t, stop, err
}

func (t *timeline) pod(obj any) {
	if p, ok := obj.(*corev1.Pod); ok {
		t.first(stagePod, p.Labels[engine.LabelInstance])
		if podReady(p) {
			t.first(stagePodReady, p.Labels[engine.LabelInstance])
		}
	}
}

func (t *timeline) deployment(obj any) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		t.first(stageDeployment, d.Labels[engine.LabelInstance])
	}
}

func (t *timeline) workspace(obj any) {
	if ws, ok := obj.(*infrav1alpha1.Workspace); ok {
		t.first(stageWorkspace, ws.Name)
		if ws.Status.Phase == infrav1alpha1.WorkspaceRunning {
			t.first(stageRunning, ws.Name)
		}
	}
}

func (t *timeline) first(s stage, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[s][name]; !ok && name != "" {
		t.seen[s][name] = time.Now()
	}
}

// complete reports whether every stage of every named workspace has been seen.
func (t *timeline) complete(names map[string]time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range names {
		for s := range stages {
			if _, ok := t.seen[s][name]; !ok {
				return false
			}
		}
	}
	return true
}

// split is the timeline of the calls made at began and returned at returned, by workspace name.
// The bench's own watch may lag behind the operator's: it is given a few seconds to catch up.
func (t *timeline) split(ctx context.Context, began, returned map[string]time.Time, wall time.Duration) (Timeline, error) {
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return t.complete(began), nil
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	steps := make([][]time.Duration, stages+1)
	for name, start := range began {
		prev := start
		for s := range stages {
			at, ok := t.seen[s][name]
			if !ok {
				return Timeline{}, fmt.Errorf("workspace %s returned Running but the bench never saw it reach %q", name, stageNames[s])
			}
			steps[s] = append(steps[s], at.Sub(prev))
			prev = at
		}
		steps[stages] = append(steps[stages], returned[name].Sub(prev))
	}
	var out Timeline
	prev := "call"
	for s, samples := range steps {
		next := "call returned"
		if s < int(stages) {
			next = stageNames[s]
		}
		out.Steps = append(out.Steps, Step{Name: prev + " → " + next, Latency: latency(samples, wall)})
		prev = next
	}
	return out, nil
}
