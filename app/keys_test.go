package app

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/cloudspace-dev/cloudspace-operator/controllers"
)

// TestWithKey: both kinds that derive credentials get the key, each its own record of use, and
// the operator's namespace; the kinds given are not changed.
func TestWithKey(t *testing.T) {
	kinds := controllers.DefaultConfig()
	key := []byte("0123456789abcdef0123456789abcdef")
	got := WithKey(kinds, key, "operators")
	ws, vm := got.Workspace, got.VM
	if string(ws.AccessKey) != string(key) || string(vm.AccessKey) != string(key) {
		t.Errorf("access keys %q and %q, want the key", ws.AccessKey, vm.AccessKey)
	}
	if ws.Activity == nil || vm.Activity == nil || ws.Activity == vm.Activity {
		t.Errorf("activity records %p and %p, want one for each kind", ws.Activity, vm.Activity)
	}
	if ws.OperatorNamespace != "operators" || vm.OperatorNamespace != "operators" {
		t.Errorf("operator namespaces %q and %q, want operators", ws.OperatorNamespace, vm.OperatorNamespace)
	}
	if kinds.Workspace.AccessKey != nil || kinds.VM.Activity != nil {
		t.Error("WithKey changed the kinds it was given")
	}
}

// TestAccessKeyNeedsANamespacedName: a Secret reference that is not namespace/name is refused
// naming its flag, before the cluster is asked.
func TestAccessKeyNeedsANamespacedName(t *testing.T) {
	_, err := AccessKey(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, "no-slash")
	if err == nil || !strings.Contains(err.Error(), "--workspace-access-key-secret") {
		t.Errorf("AccessKey(no-slash): %v, want an error naming --workspace-access-key-secret", err)
	}
}
