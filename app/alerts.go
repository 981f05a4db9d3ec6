package app

import (
	"fmt"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cloudspace-dev/cloudspace-operator/internal/alerts"
	"github.com/cloudspace-dev/cloudspace-operator/internal/engine"
)

// SetupAlerts adds the installer of the alerting rules (internal/alerts, rule is the
// PrometheusRule's YAML) when cfg enables it and the operator runs as a pod (namespace and pod
// from POD_NAMESPACE and POD_NAME): run outside a cluster, it has no Deployment to own them.
func SetupAlerts(mgr ctrl.Manager, cfg alerts.Config, rule []byte, namespace, pod string) error {
	if !cfg.Enabled {
		return nil
	}
	if namespace == "" || pod == "" {
		ctrl.Log.WithName("setup").Info("the alerting rules are not installed: POD_NAMESPACE and POD_NAME are unset (not running in a pod)")
		return nil
	}
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	inst, err := alerts.NewInstaller(mgr.GetAPIReader(), mgr.GetClient(), disc, mgr.GetEventRecorderFor(engine.DefaultFieldManager),
		ctrl.Log.WithName("alerts"), rule, cfg, namespace, pod)
	if err != nil {
		return err
	}
	if err := mgr.Add(inst); err != nil {
		return fmt.Errorf("adding the alerting rules' installer to the manager: %w", err)
	}
	return nil
}
