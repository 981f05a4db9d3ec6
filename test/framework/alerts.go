package framework

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// AlertRulesPath is the operator's PrometheusRule (config/prometheus), the one source of its
// alerting rules.
func AlertRulesPath() string {
	return filepath.Join(RepoRoot(), "config", "prometheus", "prometheusrule.yaml")
}

// AlertRule is the operator's PrometheusRule as config/prometheus has it.
func AlertRule() (map[string]any, error) {
	data, err := os.ReadFile(AlertRulesPath())
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", AlertRulesPath(), err)
	}
	if doc["spec"] == nil {
		return nil, fmt.Errorf("%s has no spec", AlertRulesPath())
	}
	return doc, nil
}

// AlertRuleFile is the PrometheusRule's spec as a Prometheus rule file: what a Prometheus that
// prometheus-operator configures loads from it, and what promtool checks.
func AlertRuleFile() ([]byte, error) {
	doc, err := AlertRule()
	if err != nil {
		return nil, err
	}
	return yaml.Marshal(doc["spec"])
}

// AlertingRule is one alerting rule of the PrometheusRule.
type AlertingRule struct {
	Alert       string            `json:"alert"`
	Annotations map[string]string `json:"annotations"`
}

// AlertingRules are the PrometheusRule's alerting rules, group after group.
func AlertingRules() ([]AlertingRule, error) {
	spec, err := AlertRuleFile()
	if err != nil {
		return nil, err
	}
	var doc struct {
		Groups []struct {
			Rules []AlertingRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("reading the rules of %s: %w", AlertRulesPath(), err)
	}
	var rules []AlertingRule
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	return rules, nil
}
