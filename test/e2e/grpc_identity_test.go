package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// serviceAccountToken makes a ServiceAccount in ns, binds it to a ClusterRole of rules (none:
// no binding), and returns a token of it, as a portal running in the cluster has one.
func serviceAccountToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	create(t, sa)
	if len(rules) > 0 {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules}
		create(t, role)
		create(t, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}})
	}
	token, err := framework.ServiceAccountToken(ctx, k8sClient, sa)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// create creates obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
}

// bearer is a context calling with token, for user when user is not empty, with a deadline.
func bearer(t *testing.T, token, user string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	md := []string{"authorization", "Bearer " + token}
	if user != "" {
		md = append(md, workspacev1.ImpersonateUserMetadata, user)
	}
	return metadata.AppendToOutgoingContext(ctx, md...)
}

// TestClusterIdentitiesAndAPortalActingForItsUsers: a ServiceAccount token is a user of the
// API as the cluster's API server says (no token Secret entry); a portal's ServiceAccount that
// may impersonate dev-alice and dev-bob creates a workspace for each, which is theirs, under
// quotas of their own, and records who asked; it may not act for anyone else, nor may a
// ServiceAccount without the right, nor a token Secret user; dev-bob cannot see dev-alice's;
// a token the API server rejects is Unauthenticated.
func TestClusterIdentitiesAndAPortalActingForItsUsers(t *testing.T) {
	ns := "portal-e2e"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	portal := serviceAccountToken(t, ns, "portal", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users"},
		Verbs: []string{"impersonate"}, ResourceNames: []string{"dev-alice", "dev-bob"}}})
	plain := serviceAccountToken(t, ns, "plain", nil)
	api := workspacev1.NewWorkspaceServiceClient(apiConn(t))

	list, err := api.List(bearer(t, plain, ""), &workspacev1.ListWorkspacesRequest{})
	if err != nil || len(list.GetWorkspaces()) != 0 {
		t.Fatalf("a ServiceAccount's own List: %+v, %v; want an empty list", list, err)
	}
	// dev-alice fills her quota (2 running workspaces in this suite); dev-bob's is his own.
	for _, name := range []string{"alice-1", "alice-2"} {
		if _, err := api.Create(bearer(t, portal, "dev-alice"), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: name}}); err != nil {
			t.Fatalf("the portal creating %s for dev-alice: %v", name, err)
		}
		t.Cleanup(func() { _, _ = api.Delete(bearer(t, portal, "dev-alice"), &workspacev1.WorkspaceRef{Name: name}) })
	}
	_, err = api.Create(bearer(t, portal, "dev-alice"), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "alice-3"}})
	wantCode(t, err, codes.ResourceExhausted, "user dev-alice has 2 running workspaces")
	if _, err := api.Create(bearer(t, portal, "dev-bob"), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: "bob-1"}}); err != nil {
		t.Fatalf("the portal creating for dev-bob, dev-alice's quota full: %v", err)
	}
	t.Cleanup(func() { _, _ = api.Delete(bearer(t, portal, "dev-bob"), &workspacev1.WorkspaceRef{Name: "bob-1"}) })

	ws := &infrav1alpha1.Workspace{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: workspaceNS, Name: "alice-1"}, ws); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":portal"; ws.Spec.Owner != "dev-alice" || ws.Annotations[infrav1alpha1.RequestedByAnnotation] != want {
		t.Errorf("alice-1: owner %q, requested by %q; want dev-alice's, requested by %s", ws.Spec.Owner, ws.Annotations[infrav1alpha1.RequestedByAnnotation], want)
	}
	waitFor(t, time.Minute, "an event on alice-1 naming dev-alice and the portal", func(ctx context.Context) error {
		var events corev1.EventList
		if err := k8sClient.List(ctx, &events, client.InNamespace(workspaceNS)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == ws.UID && e.Reason == infrav1alpha1.EventRequested &&
				e.Message == "created for dev-alice by system:serviceaccount:"+ns+":portal through the workspace API" {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
	if list, err := api.List(bearer(t, portal, "dev-bob"), &workspacev1.ListWorkspacesRequest{}); err != nil || len(list.GetWorkspaces()) != 1 {
		t.Errorf("dev-bob's List: %+v, %v; want his one workspace", list, err)
	}
	_, err = api.Get(bearer(t, portal, "dev-bob"), &workspacev1.WorkspaceRef{Name: "alice-1"})
	wantCode(t, err, codes.NotFound, "alice-1")

	_, err = api.List(bearer(t, portal, "dev-carol"), &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.PermissionDenied, "may not impersonate user \"dev-carol\"")
	_, err = api.List(bearer(t, plain, "dev-alice"), &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.PermissionDenied, "may not impersonate")
	_, err = api.List(bearer(t, tokens["alice"], "dev-alice"), &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.PermissionDenied, "only a cluster identity")
	_, err = api.List(bearer(t, "eyJhbGciOiJSUzI1NiJ9.made-up.signature", ""), &workspacev1.ListWorkspacesRequest{})
	wantCode(t, err, codes.Unauthenticated, "unknown token")
}
