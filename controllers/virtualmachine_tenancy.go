package controllers

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// vmTenancy is VirtualMachine's lifecycle with the egress policy of its launcher pod.
type vmTenancy struct {
	VirtualMachineLifecycle
	egress map[string]any
}

// vmTenancy, which the registry registers, embeds the VM's lifecycle: it must keep every
// optional interface, which the engine finds by type assertion.
var (
	_ engine.StatusReporter = vmTenancy{}
	_ engine.Retainer       = vmTenancy{}
	_ engine.PodObserver    = vmTenancy{}
	_ engine.PodWatcher     = vmTenancy{}
	_ engine.Adopter        = vmTenancy{}
)

// Values adds the egress policy to the VM's values.
func (l vmTenancy) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	vals, err := l.VirtualMachineLifecycle.Values(obj)
	if err != nil {
		return nil, err
	}
	vals["egress"] = l.egress
	return vals, nil
}
