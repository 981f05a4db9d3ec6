package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakedynamic "k8s.io/client-go/dynamic/fake"
)

// TestVMStartRaisesStartRequests: each start raises spec.startRequests by one (a change to the
// spec, which runs a VM the operator stopped), says so, and notes a Halted run strategy; a
// missing VM is exit 5.
func TestVMStartRaisesStartRequests(t *testing.T) {
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infra.cloudspace.dev/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "dev", "namespace": "team", "resourceVersion": "7"},
		"spec":     map[string]any{"runStrategy": "Halted", "startRequests": int64(2)},
	}}
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{vmResource: "VirtualMachineList"}, vm)
	vms := dyn.Resource(vmResource).Namespace("team")
	var out bytes.Buffer
	if err := startVM(context.Background(), vms, "dev", &out); err != nil {
		t.Fatal(err)
	}
	got, err := vms.Get(context.Background(), "dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "startRequests"); n != 3 {
		t.Errorf("spec.startRequests %d, want 3", n)
	}
	if !strings.Contains(out.String(), "start requested (spec.startRequests 3)") || !strings.Contains(out.String(), "runStrategy is Halted") {
		t.Errorf("said %q", out.String())
	}
	if err := startVM(context.Background(), vms, "nope", &out); codeOf(err) != ExitNotFound {
		t.Errorf("a missing VM: %v (exit %d), want exit %d", err, codeOf(err), ExitNotFound)
	}
}
