package alerts

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultInterval is how often the installer looks at the PrometheusRule again.
const DefaultInterval = 5 * time.Minute

// Config is what an admin sets of the alerting rules' install, each field one of the
// operator's flags (BindFlags).
type Config struct {
	// Enabled installs the rules where Prometheus Operator runs (--prometheus-rule); on by
	// default.
	Enabled bool
	// Labels are added to the PrometheusRule's own (--prometheus-rule-labels): those a
	// Prometheus's ruleSelector asks for, kube-prometheus-stack's release=NAME say.
	Labels map[string]string
	// Interval is how often it is looked at again; DefaultInterval when 0. Not a flag.
	Interval time.Duration
}

// DefaultConfig is the configuration when the flags set nothing.
func DefaultConfig() Config { return Config{Enabled: true} }

func (c Config) interval() time.Duration {
	if c.Interval <= 0 {
		return DefaultInterval
	}
	return c.Interval
}

// BindFlags registers the flags on fs, bound to c, with c's values as their defaults.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "prometheus-rule", c.Enabled,
		"Keep the operator's alerting rules as the PrometheusRule cloudspace-operator-alerts in its namespace, owned by its Deployment, where Prometheus Operator's monitoring.coreos.com/v1 is served.")
	fs.Var(labelsFlag{&c.Labels}, "prometheus-rule-labels",
		"Labels added to that PrometheusRule, as key=value,key=value: those your Prometheus's ruleSelector selects.")
}

// labelsFlag is a flag of comma-separated key=value labels, each checked as Kubernetes checks
// a label.
type labelsFlag struct{ m *map[string]string }

func (f labelsFlag) String() string {
	if f.m == nil {
		return ""
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(*f.m)) {
		kv = append(kv, k+"="+(*f.m)[k])
	}
	return strings.Join(kv, ",")
}

func (f labelsFlag) Set(s string) error {
	out := map[string]string{}
	var errs []error
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q is not key=value", kv))
			continue
		}
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			errs = append(errs, fmt.Errorf("label %q: %s", kv, msg))
		}
		out[k] = v
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*f.m = out
	return nil
}
