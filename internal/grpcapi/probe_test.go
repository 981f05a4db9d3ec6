package grpcapi

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/pb"
	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
)

// answer is what a call told its caller: the code, the message with the name asked about
// replaced by NAME, and the legacy CloudIdeService's PodStatus when it answers with one.
type answer struct {
	code      codes.Code
	message   string
	podStatus string
}

// probeCalls are every call that takes a workspace's name, as mallory makes them.
func probeCalls(v1 *v1Service, legacy *legacyService) map[string]func(ctx context.Context, name string) (any, error) {
	ref := func(name string) *workspacev1.WorkspaceRef {
		return &workspacev1.WorkspaceRef{Namespace: "ides", Name: name}
	}
	q := func(name string) *pb.QueryOption { return &pb.QueryOption{Namespace: "ides", Name: name} }
	return map[string]func(context.Context, string) (any, error){
		"v1.Get": func(ctx context.Context, n string) (any, error) { return v1.Get(ctx, ref(n)) },
		"v1.Start": func(ctx context.Context, n string) (any, error) {
			return v1.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: ref(n)})
		},
		"v1.StartAndWait": func(ctx context.Context, n string) (any, error) {
			return v1.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: ref(n), Wait: true})
		},
		"v1.Stop":                func(ctx context.Context, n string) (any, error) { return v1.Stop(ctx, ref(n)) },
		"v1.Delete":              func(ctx context.Context, n string) (any, error) { return v1.Delete(ctx, ref(n)) },
		"v1.GetAccess":           func(ctx context.Context, n string) (any, error) { return v1.GetAccess(ctx, ref(n)) },
		"v1.RotateAccess":        func(ctx context.Context, n string) (any, error) { return v1.RotateAccess(ctx, ref(n)) },
		"v1.KeepAlive":           func(ctx context.Context, n string) (any, error) { return v1.KeepAlive(ctx, ref(n)) },
		"legacy.GetPodSpaceInfo": func(ctx context.Context, n string) (any, error) { return legacy.GetPodSpaceInfo(ctx, q(n)) },
		"legacy.DeleteSpace":     func(ctx context.Context, n string) (any, error) { return legacy.DeleteSpace(ctx, q(n)) },
		"legacy.GetPodSpaceStatus": func(ctx context.Context, n string) (any, error) {
			return legacy.GetPodSpaceStatus(ctx, q(n))
		},
	}
}

// TestAnotherUsersNameAnswersAsAMissingOne: mallory asks every call that takes a name about
// bob's workspace and about a name nobody has; each answer is the same for both, so she cannot
// learn which names other users have. Bob's workspace is untouched.
func TestAnotherUsersNameAnswersAsAMissingOne(t *testing.T) {
	bobs := &infrav1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "ides", Name: "bobs-secret-project", UID: "bobs-uid"},
		Spec: infrav1alpha1.WorkspaceSpec{Owner: "bob", Running: ptr.To(false)}}
	server := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(bobs).
		WithIndex(&infrav1alpha1.Workspace{}, ownerField, ownerIndex).Build()
	cfg := testSettings(t, inIDEs)
	cfg.AccessKey = make([]byte, 32)
	w := newWorkspaces(server, server, server, newNotifier(), cfg, newQuotaLock(server, server, "ops"))
	ctx := context.WithValue(context.Background(), userKey{}, "mallory")
	for call, do := range probeCalls(&v1Service{w: w}, &legacyService{w: w}) {
		taken := answerOf(do(ctx, bobs.Name))
		taken.message = strings.ReplaceAll(taken.message, bobs.Name, "NAME")
		free := answerOf(do(ctx, "nobodys-project"))
		free.message = strings.ReplaceAll(free.message, "nobodys-project", "NAME")
		if taken != free {
			t.Errorf("%s: bob's name answers %+v, a free name %+v; want the same answer", call, taken, free)
		}
		if taken.code == codes.PermissionDenied {
			t.Errorf("%s: bob's name answers PermissionDenied, which says that it exists", call)
		}
	}
	var after infrav1alpha1.Workspace
	if err := server.Get(context.Background(), client.ObjectKeyFromObject(bobs), &after); err != nil || *after.Spec.Running || after.Spec.Access.Rotation != 0 {
		t.Errorf("bob's workspace after mallory's calls: %+v, %v", after.Spec, err)
	}
}

func answerOf(resp any, err error) answer {
	a := answer{code: status.Code(err), message: status.Convert(err).Message()}
	if ps, ok := resp.(*pb.PodStatus); ok && ps != nil {
		a.podStatus = ps.String()
	}
	return a
}
