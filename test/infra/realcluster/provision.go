package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

// ProvisionerName is the provisioner of the real cluster's default StorageClass.
const ProvisionerName = "cloudspace.dev/real-local"

// localProvisioner makes each volume a directory on the node, served as a local
// PersistentVolume bound to the node: the kubelet mounts it and applies the pod's fsGroup to it,
// as a CSI driver for block storage would.
type localProvisioner struct {
	// dir holds the volumes' directories.
	dir string
}

var _ controller.Provisioner = localProvisioner{}

// Provision creates the claim's directory and its PersistentVolume on the selected node.
func (p localProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNode == nil {
		return nil, controller.ProvisioningFinished, errors.New("the StorageClass binds on first use: no node was selected")
	}
	path := filepath.Join(p.dir, o.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating %s: %w", path, err)
	}
	mode := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *o.StorageClass.ReclaimPolicy,
			AccessModes:                   o.PVC.Spec.AccessModes,
			VolumeMode:                    &mode,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{o.SelectedNode.Name},
				}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory.
func (p localProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.Local == nil || filepath.Dir(pv.Spec.Local.Path) != p.dir {
		return &controller.IgnoredError{Reason: "not a volume of this provisioner"}
	}
	return os.RemoveAll(pv.Spec.Local.Path)
}

// Provision runs the provisioner until ctx ends.
func Provision(ctx context.Context, kubeconfig, dir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pc := controller.NewProvisionController(ctx, cs, ProvisionerName, localProvisioner{dir: dir},
		controller.LeaderElection(false))
	pc.Run(ctx)
	return nil
}
