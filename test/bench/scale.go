package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/cloudspace-dev/cloudspace-operator/internal/inspect"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

const scaleNamespace = "bench-scale"

// ScalePoint is the operator holding Resources Demos: a pure chart kind (a ConfigMap and a
// Service each, no pods), so that the operator rather than the cluster is what is measured.
type ScalePoint struct {
	Resources int `json:"resources"`
	// Create is the Demos added since the previous point, created at once with the operator
	// running, until every Demo is Ready; its writes are per added Demo.
	Create Phase `json:"create"`
	// Restart is a new operator over all of them, until it has reconciled each once.
	Restart Phase `json:"restart"`
	// Idle is that operator with nothing changing; its peak RSS is the memory the operator
	// needs to hold this many resources.
	Idle Phase `json:"idle"`
}

// Scale is the scale curve.
type Scale struct {
	// BaseRSSMiB is a new operator's peak RSS with no Demo yet.
	BaseRSSMiB float64      `json:"baseRSSMiB"`
	Points     []ScalePoint `json:"points"`
}

// parseSizes reads -scale: ascending resource counts, or nothing for no scale phase.
func parseSizes(text string) ([]int, error) {
	var sizes []int
	for f := range strings.FieldsFuncSeq(text, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-scale: %q is not a positive number of resources", f)
		}
		if len(sizes) > 0 && n <= sizes[len(sizes)-1] {
			return nil, fmt.Errorf("-scale: %d after %d: sizes must ascend", n, sizes[len(sizes)-1])
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// scale grows the Demos to each size in turn with an operator serving only Demo, then restarts
// the operator over them and leaves it idle.
func (b *bench) scale(ctx context.Context) (*Scale, error) {
	demos, stop, err := b.setUpScale(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	op, err := b.startScaleOperator(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = op.Stop(time.Minute) }()
	u, err := framework.Usage(op.PID())
	if err != nil {
		return nil, err
	}
	out := &Scale{BaseRSSMiB: u.PeakRSSMiB}
	prev := 0
	for _, n := range b.o.scale {
		var p ScalePoint
		if p, op, err = b.scalePoint(ctx, op, demos, prev, n); err != nil {
			return out, fmt.Errorf("%d Demos: %w", n, err)
		}
		out.Points = append(out.Points, p)
		prev = n
	}
	return out, nil
}

// scalePoint adds Demos prev..n-1 with op running, then measures a new operator over all n; it
// returns that operator, which the next point creates with.
func (b *bench) scalePoint(ctx context.Context, op *framework.Operator, demos cache.Cache, prev, n int) (ScalePoint, *framework.Operator, error) {
	p := ScalePoint{Resources: n}
	fmt.Printf("bench: scale: %d → %d Demos\n", prev, n)
	var err error
	p.Create, err = b.phaseOver(ctx, op, n-prev, func() error {
		if err := b.parallel(n-prev, func(i int) error { return b.c.Create(ctx, benchDemo(prev+i)) }); err != nil {
			return err
		}
		// The cluster takes longer per resource as it fills up: the limit grows with the batch.
		limit := b.o.timeout + time.Duration(n-prev)*150*time.Millisecond
		return wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
			return demosReady(ctx, demos, n)
		})
	})
	if err != nil {
		return p, op, fmt.Errorf("creating: %w", err)
	}
	if err := op.Stop(time.Minute); err != nil {
		return p, op, fmt.Errorf("stopping the operator: %w", err)
	}
	if op, err = b.startScaleOperator(ctx, n); err != nil {
		return p, op, err
	}
	p.Restart, err = b.phaseOver(ctx, op, n, func() error {
		return b.waitUntil(ctx, func(ctx context.Context) (bool, error) {
			done, err := reconciles(ctx, op, framework.DemoController)
			return done >= float64(n), err
		})
	})
	if err != nil {
		return p, op, fmt.Errorf("restart: %w", err)
	}
	p.Idle, err = b.phaseOver(ctx, op, n, func() error {
		time.Sleep(b.o.steady)
		return nil
	})
	if err == nil && b.o.heapProfiles != "" {
		err = saveHeapProfile(ctx, op, filepath.Join(b.o.heapProfiles, fmt.Sprintf("heap-%d.pprof", n)))
	}
	return p, op, err
}

// saveHeapProfile writes op's heap profile (after a GC) to path, for go tool pprof.
func saveHeapProfile(ctx context.Context, op *framework.Operator, path string) error {
	profile, err := framework.HTTPGet(ctx, op.PprofAddr, "/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("reading the heap profile: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, profile, 0o644)
}

// setUpScale installs the Demo kind, makes the phase's namespace and starts a cache of its
// Demos (to count the Ready ones without listing thousands each time); stop ends the cache.
func (b *bench) setUpScale(ctx context.Context) (cache.Cache, func(), error) {
	crd := filepath.Join(framework.RepoRoot(), "test", "testdata", "crds", "demos.yaml")
	if _, err := envtest.InstallCRDs(b.cluster.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true}); err != nil {
		return nil, nil, fmt.Errorf("installing the Demo CRD: %w", err)
	}
	if err := b.namespace(ctx, scaleNamespace); err != nil {
		return nil, nil, err
	}
	return b.startCache(ctx, scaleNamespace, func(c cache.Cache) error {
		demo := &unstructured.Unstructured{}
		demo.SetGroupVersionKind(framework.DemoGVK)
		_, err := c.GetInformer(ctx, demo)
		return err
	})
}

// startScaleOperator starts an operator that serves Demo only, so that nothing the earlier
// phases left is in its memory or CPU; n is the number of Demos it finds, for its log's name.
func (b *bench) startScaleOperator(ctx context.Context, n int) (*framework.Operator, error) {
	watches := filepath.Join(b.work, "scale-watches.yaml")
	if err := framework.WriteDemoWatches(watches, nil); err != nil {
		return nil, err
	}
	// The workspace flags stay (the access key lives where the bench made it); the API is off.
	return b.startOperator(ctx, fmt.Sprintf("operator-scale-%d.log", n), "--watches-file="+watches, "--grpc-bind-address=0")
}

func benchDemo(i int) *unstructured.Unstructured {
	d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"greeting": "hello"}}}
	d.SetGroupVersionKind(framework.DemoGVK)
	d.SetNamespace(scaleNamespace)
	d.SetName(fmt.Sprintf("demo-%d", i))
	return d
}

// demosReady reports whether want Demos are Ready, as the cache sees them.
func demosReady(ctx context.Context, demos cache.Cache, want int) (bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(framework.DemoGVK.GroupVersion().WithKind("DemoList"))
	if err := demos.List(ctx, list); err != nil {
		return false, err
	}
	ready := 0
	for i := range list.Items {
		if inspect.IsReady(&list.Items[i]) {
			ready++
		}
	}
	return ready == want, nil
}

func reportScale(s *Scale) {
	fmt.Printf("\nScale: Demos (a pure chart kind: a ConfigMap and a Service each); a new operator's RSS with none: %.1f MiB\n\n", s.BaseRSSMiB)
	fmt.Printf("%9s %9s %9s %9s %9s %9s %10s %9s %10s %9s %9s\n", "resources", "added", "ready s", "added/s",
		"writes/CR", "CPU-s", "restart s", "writes/CR", "peak RSS", "idle CPU", "idle wr.")
	prev := ScalePoint{}
	for _, p := range s.Points {
		added := float64(p.Resources - prev.Resources)
		fmt.Printf("%9d %9.0f %9.1f %9.0f %9.2f %9.1f %10.1f %9.2f %6.1f MiB %9.2f %9.0f\n", p.Resources, added, p.Create.Seconds,
			added/p.Create.Seconds, p.Create.WritesPerCR, p.Create.OperatorCPU, p.Restart.Seconds, p.Restart.WritesPerCR,
			p.Idle.OperatorRSSMB, p.Idle.OperatorCPU, p.Idle.Writes)
		prev = p
	}
	if len(s.Points) == 0 {
		return
	}
	last := s.Points[len(s.Points)-1]
	fmt.Printf("\nwrites per added Demo by cause (the last point): %s\n", byCause(last.Create.WritesPerCRByCause))
	fmt.Println("\nmemory per 1,000 Demos (between points):")
	prevN, prevRSS := 0, s.BaseRSSMiB
	for _, p := range s.Points {
		fmt.Printf("  %d → %d: %.1f MiB\n", prevN, p.Resources, (p.Idle.OperatorRSSMB-prevRSS)*1000/float64(p.Resources-prevN))
		prevN, prevRSS = p.Resources, p.Idle.OperatorRSSMB
	}
}
