package realnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// checkPortal runs a portal as README and docs/api.md set it up, against the operator OLM
// installed (whose CSV grants it TokenReviews and SubjectAccessReviews): a ServiceAccount that
// RBAC lets impersonate dev-alice and dev-bob creates a workspace for each with its own token
// and the impersonate-user metadata; each is its user's, recording the portal; each user lists
// only theirs; dev-carol is PermissionDenied.
func checkPortal(t *testing.T, api apiAccess) {
	ctx := context.Background()
	ensureNamespace(t, workspaceNS)
	ensureNamespace(t, "portal-real")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "portal-real", Name: "portal"}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portal-real"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"dev-alice", "dev-bob"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portal-real"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := k8sClient.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
	}
	token, err := framework.ServiceAccountToken(ctx, k8sClient, sa)
	if err != nil {
		t.Fatal(err)
	}
	c := apiClient(t, api)
	forUser := func(user string) context.Context {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token,
			workspacev1.ImpersonateUserMetadata, user), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	for _, user := range []string{"dev-alice", "dev-bob"} {
		ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "portal-" + user}
		// Not waited for: that an IDE runs is checkWorkspace's.
		if _, err := c.Create(forUser(user), &workspacev1.CreateWorkspaceRequest{Workspace: &workspacev1.Workspace{Name: ref.Name, Namespace: ref.Namespace}}); err != nil {
			t.Fatalf("the portal creating for %s: %v", user, err)
		}
		t.Cleanup(func() { _, _ = c.Delete(forUser(user), ref) })
		ws := &infrav1alpha1.Workspace{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: workspaceNS, Name: ref.Name}, ws); err != nil {
			t.Fatal(err)
		}
		if want := "system:serviceaccount:portal-real:portal"; ws.Spec.Owner != user || ws.Annotations[infrav1alpha1.RequestedByAnnotation] != want {
			t.Errorf("%s: owner %q, requested by %q; want %s's, requested by %s", ref.Name, ws.Spec.Owner, ws.Annotations[infrav1alpha1.RequestedByAnnotation], user, want)
		}
		list, err := c.List(forUser(user), &workspacev1.ListWorkspacesRequest{})
		if err != nil || len(list.GetWorkspaces()) != 1 || list.GetWorkspaces()[0].GetName() != ref.Name {
			t.Errorf("%s's List through the portal: %v, %v; want only %s", user, list.GetWorkspaces(), err, ref.Name)
		}
	}
	_, err = c.List(forUser("dev-carol"), &workspacev1.ListWorkspacesRequest{})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), `may not impersonate user "dev-carol"`) {
		t.Errorf("the portal acting for dev-carol: %v, want PermissionDenied", err)
	}
}
