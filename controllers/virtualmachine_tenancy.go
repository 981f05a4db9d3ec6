package controllers

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// vmTenancy is VirtualMachine's lifecycle with the egress policy of its launcher pod.
type vmTenancy struct {
	VirtualMachineLifecycle
	egress map[string]any
}

// Values adds the egress policy to the VM's values.
func (l vmTenancy) Values(obj *unstructured.Unstructured) (map[string]any, error) {
	vals, err := l.VirtualMachineLifecycle.Values(obj)
	if err != nil {
		return nil, err
	}
	vals["egress"] = l.egress
	return vals, nil
}
