// Command workspace-watcher shows the operator's generated Go clients (pkg/client) at work, the
// way seed 003's sample-controller does: it watches Workspaces through a shared informer
// factory, reads each one from the lister when its key comes off a work queue, prints it, and,
// with -acknowledge, marks a workspace that has no phase yet Pending with UpdateStatus.
//
// Next to the operator, which owns the status and sets the phase within a second, only the
// printing is of use; -acknowledge shows the status subresource's client on a cluster without it.
//
//	go run ./examples/workspace-watcher -namespace cloudspace-workspaces
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/client/clientset/versioned"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/client/informers/externalversions"
	listers "github.com/cloudspace-dev/cloudspace-operator/pkg/client/listers/api/v1alpha1"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	namespace := flag.String("namespace", "", "namespace to watch (default: every namespace)")
	acknowledge := flag.Bool("acknowledge", false, "mark workspaces that have no phase yet Pending (UpdateStatus)")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "workspace-watcher:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := &Watcher{Clients: versioned.NewForConfigOrDie(cfg), Namespace: *namespace, Acknowledge: *acknowledge, Out: os.Stdout}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "workspace-watcher:", err)
		os.Exit(1)
	}
}

// Acknowledged is the message a workspace marked Pending by the watcher carries.
const Acknowledged = "acknowledged by workspace-watcher"

// Watcher prints the Workspaces of a namespace as they change.
type Watcher struct {
	Clients     versioned.Interface
	Namespace   string
	Acknowledge bool
	Out         io.Writer
}

// Run watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	factory := externalversions.NewSharedInformerFactoryWithOptions(w.Clients, 10*time.Minute, externalversions.WithNamespace(w.Namespace))
	informer := factory.Infra().V1alpha1().Workspaces()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the %v cache did not sync", typ)
		}
	}
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for w.next(ctx, queue, informer.Lister()) {
	}
	return nil
}

// next handles one key from the queue; it returns false once the queue is shut down.
func (w *Watcher) next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], lister listers.WorkspaceLister) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	if err := w.handle(ctx, key, lister); err != nil {
		fmt.Fprintf(w.Out, "%s: %v (retrying)\n", key, err)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// handle prints the workspace under key, as the lister has it, and acknowledges it if asked.
func (w *Watcher) handle(ctx context.Context, key string, lister listers.WorkspaceLister) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	ws, err := lister.Workspaces(ns).Get(name)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(w.Out, "%s deleted\n", key)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w.Out, "%s owner=%s phase=%s url=%s\n", key, ws.Spec.Owner, ws.Status.Phase, ws.Status.URL)
	if !w.Acknowledge || ws.Status.Phase != "" {
		return nil
	}
	// Objects from the lister are the cache's own: change a copy.
	ws = ws.DeepCopy()
	ws.Status.Phase, ws.Status.Message = infrav1alpha1.WorkspacePending, Acknowledged
	_, err = w.Clients.InfraV1alpha1().Workspaces(ns).UpdateStatus(ctx, ws, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return errors.New("the workspace changed meanwhile")
	}
	return err
}
