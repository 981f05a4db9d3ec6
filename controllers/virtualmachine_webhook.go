package controllers

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1alpha1 "github.com/cloudspace-dev/cloudspace-operator/api/v1alpha1"
	"github.com/cloudspace-dev/cloudspace-operator/internal/decode"
)

// The webhooks fail closed (failurePolicy=Fail): a VM admitted without them would miss the
// operator's image default and limits. The lifecycle applies both again, so an outage of the
// webhook only delays creates and updates, with an error that says so. They have no side
// effects (sideEffects=None): dry-run requests are safe.
// +kubebuilder:webhook:path=/mutate-infra-cloudspace-dev-v1alpha1-virtualmachine,mutating=true,failurePolicy=fail,sideEffects=None,groups=infra.cloudspace.dev,resources=virtualmachines,verbs=create;update,versions=v1alpha1,name=mvirtualmachine.infra.cloudspace.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-infra-cloudspace-dev-v1alpha1-virtualmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infra.cloudspace.dev,resources=virtualmachines,verbs=create;update,versions=v1alpha1,name=vvirtualmachine.infra.cloudspace.dev,admissionReviewVersions=v1

// VirtualMachineWebhook is the VirtualMachine's admission webhooks, a defaulter and a validator
// (controller-runtime's CustomDefaulter and CustomValidator), which apply what the CRD's schema
// and CEL rules cannot know: the operator's image default and limits, image reference syntax,
// and whether the cluster serves KubeVirt.
type VirtualMachineWebhook struct {
	VMConfig
	// KubeVirtServed reports whether the cluster serves kubevirt.io/v1 VirtualMachine.
	KubeVirtServed func(context.Context) (bool, error)
}

var (
	_ admission.CustomDefaulter = VirtualMachineWebhook{}
	_ admission.CustomValidator = VirtualMachineWebhook{}
)

// SetupVirtualMachineWebhook serves the VirtualMachine webhooks on the manager's webhook server.
func SetupVirtualMachineWebhook(mgr ctrl.Manager, cfg VMConfig) error {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	wh := VirtualMachineWebhook{VMConfig: cfg, KubeVirtServed: func(context.Context) (bool, error) { return kubeVirtServed(dc) }}
	// Registered by hand rather than with ctrl.NewWebhookManagedBy: a VM its Go type cannot
	// hold ("memory: abc") is refused naming the field (checkDecode) before the handlers decode it.
	vm, kind := &infrav1alpha1.VirtualMachine{}, vmGVK.GroupKind()
	srv := mgr.GetWebhookServer()
	srv.Register(vmMutatePath, decode.Webhook(admission.WithCustomDefaulter(mgr.GetScheme(), vm, wh), kind, vm))
	srv.Register(vmValidatePath, decode.Webhook(admission.WithCustomValidator(mgr.GetScheme(), vm, wh), kind, vm))
	return nil
}

// The webhooks' paths, as the markers above name them (and controller-runtime would).
const (
	vmMutatePath   = "/mutate-infra-cloudspace-dev-v1alpha1-virtualmachine"
	vmValidatePath = "/validate-infra-cloudspace-dev-v1alpha1-virtualmachine"
)

func kubeVirtServed(dc discovery.DiscoveryInterface) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(kubeVirtVM.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asking the API server for KubeVirt: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Kind == kubeVirtVM.Kind {
			return true, nil
		}
	}
	return false, nil
}

// Default fills the VM's unset fields.
func (w VirtualMachineWebhook) Default(_ context.Context, obj runtime.Object) error {
	vm, ok := obj.(*infrav1alpha1.VirtualMachine)
	if !ok {
		return fmt.Errorf("expected a VirtualMachine, got %T", obj)
	}
	w.VMConfig.Default(vm)
	return nil
}

// ValidateCreate checks a new VM, including that the backend it asks for is served.
func (w VirtualMachineWebhook) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	return nil, w.validate(ctx, obj, nil)
}

// ValidateUpdate checks a changed VM; the limits only on the fields that change.
func (w VirtualMachineWebhook) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, ok := oldObj.(*infrav1alpha1.VirtualMachine)
	if !ok {
		return nil, fmt.Errorf("expected a VirtualMachine, got %T", oldObj)
	}
	return nil, w.validate(ctx, newObj, old)
}

// ValidateDelete allows every delete: the finalizer tears the VM down.
func (VirtualMachineWebhook) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func (w VirtualMachineWebhook) validate(ctx context.Context, obj runtime.Object, old *infrav1alpha1.VirtualMachine) error {
	vm, ok := obj.(*infrav1alpha1.VirtualMachine)
	if !ok {
		return fmt.Errorf("expected a VirtualMachine, got %T", obj)
	}
	errs := append(w.Validate(vm, old), validateGracePeriod(vm)...)
	if old == nil && vm.Spec.Backend == infrav1alpha1.BackendKubeVirt {
		served, err := w.KubeVirtServed(ctx)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if !served {
			errs = append(errs, field.Invalid(field.NewPath("spec", "backend"), vm.Spec.Backend,
				"the cluster does not serve kubevirt.io/v1 VirtualMachine: install KubeVirt, or use pod or auto"))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(vmGVK.GroupKind(), vm.Name, errs)
}

// maxVMGracePeriod is the longest shutdownGracePeriod, as the CRD's rule says: the pod's (or
// KubeVirt's) termination grace period, which keeps a deleted VM, and its node's resources,
// waiting for a guest that ignores the power-off.
const maxVMGracePeriod = time.Hour

// validateGracePeriod refuses a shutdown grace period outside 0s to maxVMGracePeriod. The CRD
// refuses it too; checked here as well for a VM admitted under an older CRD without the rule.
func validateGracePeriod(vm *infrav1alpha1.VirtualMachine) field.ErrorList {
	p := vm.Spec.ShutdownGracePeriod
	if p == nil || (p.Duration >= 0 && p.Duration <= maxVMGracePeriod) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "shutdownGracePeriod"), p.Duration.String(),
		"must be from 0s to 1h, such as 60s or 5m")}
}
