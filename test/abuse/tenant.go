package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// The attacks in this file are a tenant's: objects written to the cluster, with the rights a
// tenant has in their own namespace, not calls to the operator's API.

// attackLabel marks what an attack created, so that it is removed after it.
const attackLabel = "abuse.cloudspace.dev/attack"

// giantSpecs creates Workspaces as big as the API server would store, each held by the
// operator several times (the cache, the render, the last render).
func (a *abuse) giantSpecs(ctx context.Context) (string, string, error) {
	value := strings.Repeat("v", 20_000)
	var accepted, refused, failed atomic.Int64
	err := framework.Parallel(8, a.o.giantSpecs, func(i int) error {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{
			Namespace: workspaceNS, Name: fmt.Sprintf("giant-%d", i), Labels: map[string]string{attackLabel: "giant"},
		}, Spec: infrav1alpha1.WorkspaceSpec{Owner: "mallory"}}
		for j := range 64 {
			ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: fmt.Sprintf("PAD_%d", j), Value: value})
		}
		switch err := a.c.Create(ctx, ws); {
		case apierrors.IsInvalid(err):
			refused.Add(1)
		case err == nil:
			accepted.Add(1)
		default:
			failed.Add(1)
		}
		return nil
	})
	if err != nil {
		return "", "", err
	}
	answer := fmt.Sprintf("accepted %d, refused as invalid %d, failed otherwise %d", accepted.Load(), refused.Load(), failed.Load())
	if accepted.Load() > 0 {
		// Let the operator take them in before the peak is read. Objects this large can
		// overwhelm the API server itself; that is part of the answer, not the run's failure.
		if err := a.settle(ctx); err != nil {
			answer += fmt.Sprintf(" (the operator did not settle: %v)", err)
		}
	}
	// One by one: a collection delete of objects this large outlasts the API server's timeout.
	err = framework.Parallel(8, a.o.giantSpecs, func(i int) error {
		ws := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: workspaceNS, Name: fmt.Sprintf("giant-%d", i)}}
		return client.IgnoreNotFound(a.c.Delete(ctx, ws))
	})
	if err != nil {
		return "", "", err
	}
	through := ""
	if accepted.Load() > 0 {
		through = fmt.Sprintf("%d accepted", accepted.Load())
	}
	return answer, through, nil
}

// labelledSecrets fills the workspace namespace with large Secrets carrying the operator's
// managed-by label, which anyone who may create a Secret may set.
func (a *abuse) labelledSecrets(ctx context.Context) (string, string, error) {
	return a.fillWithSecrets(ctx, nil)
}

// ownedSecrets is labelledSecrets with each Secret naming a Workspace of the namespace as its
// controller, as the Workspace's own tenant can (its UID is theirs to read).
func (a *abuse) ownedSecrets(ctx context.Context) (string, string, error) {
	var list infrav1alpha1.WorkspaceList
	if err := a.c.List(ctx, &list, client.InNamespace(workspaceNS)); err != nil || len(list.Items) == 0 {
		return "", "", fmt.Errorf("no workspace to claim as an owner: %v", err)
	}
	ws := list.Items[0]
	return a.fillWithSecrets(ctx, []metav1.OwnerReference{{
		APIVersion: infrav1alpha1.GroupVersion.String(), Kind: "Workspace", Name: ws.Name, UID: ws.UID, Controller: ptr.To(true),
	}})
}

// fillWithSecrets creates the attack's Secrets with owners, waits until the operator has seen
// them all, and removes them.
func (a *abuse) fillWithSecrets(ctx context.Context, owners []metav1.OwnerReference) (string, string, error) {
	data := []byte(strings.Repeat("s", a.o.secretKiB<<10))
	err := framework.Parallel(8, a.o.secrets, func(i int) error {
		return a.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: workspaceNS, Name: fmt.Sprintf("labelled-%d-%d", len(owners), i), OwnerReferences: owners,
			Labels: map[string]string{engine.LabelManagedBy: engine.ManagedByValue, attackLabel: "secrets"},
		}, Data: map[string][]byte{"pad": data}})
	})
	if err != nil {
		return "", "", err
	}
	if err := a.settle(ctx); err != nil {
		return "", "", err
	}
	if err := a.c.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(workspaceNS), client.MatchingLabels{attackLabel: "secrets"}); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("the API server stored %d", a.o.secrets), "", nil
}

// settle returns once the operator has seen every Secret written before it: it deletes a
// workspace's access Secret and waits until the operator has put it back, which it does from
// the same watch, so every earlier event has reached its cache by then.
func (a *abuse) settle(ctx context.Context) error {
	var list infrav1alpha1.WorkspaceList
	if err := a.c.List(ctx, &list, client.InNamespace(workspaceNS)); err != nil {
		return err
	}
	var key client.ObjectKey
	for _, ws := range list.Items {
		if ws.Labels[attackLabel] == "" && ws.DeletionTimestamp == nil {
			key = client.ObjectKey{Namespace: workspaceNS, Name: ws.Name + "-access"}
			break
		}
	}
	if key.Name == "" {
		return fmt.Errorf("no workspace to settle on")
	}
	var old corev1.Secret
	if err := a.c.Get(ctx, key, &old); err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	if err := a.c.Delete(ctx, &old); err != nil {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var now corev1.Secret
		err := a.c.Get(ctx, key, &now)
		return err == nil && now.UID != old.UID, client.IgnoreNotFound(err)
	})
}
