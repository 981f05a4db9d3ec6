package framework

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/common/expfmt"
	"k8s.io/client-go/rest"
)

// writeVerbs are the apiserver_request_total verbs that change state.
var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}

// APIWrites reads the API server's own request counter (apiserver_request_total on /metrics)
// and returns the write requests served so far, per resource, for the named resources (all
// when none are named).
func APIWrites(ctx context.Context, c rest.Interface, resources ...string) (map[string]float64, error) {
	raw, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return SumCounter(raw, "apiserver_request_total", func(labels map[string]string) (string, bool) {
		keep := slices.Contains(writeVerbs, labels["verb"]) && (len(resources) == 0 || slices.Contains(resources, labels["resource"]))
		return labels["resource"], keep
	})
}

// APIWriteCauses is APIWrites for every resource, split by subresource and verb: "pods POST",
// "genericdaemons PATCH" (a finalizer), "genericdaemons/status APPLY".
func APIWriteCauses(ctx context.Context, c rest.Interface) (map[string]float64, error) {
	raw, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return SumCounter(raw, "apiserver_request_total", func(labels map[string]string) (string, bool) {
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		return key + " " + labels["verb"], slices.Contains(writeVerbs, labels["verb"])
	})
}

// SumCounter parses Prometheus text exposition and sums the counter family's samples by the key
// that group returns for each sample's labels, skipping samples for which it returns false.
func SumCounter(raw []byte, family string, group func(labels map[string]string) (string, bool)) (map[string]float64, error) {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	out := map[string]float64{}
	for _, m := range families[family].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if key, ok := group(labels); ok {
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}

// SumGauge parses Prometheus text exposition and sums the gauge family's samples.
func SumGauge(raw []byte, family string) (float64, error) {
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("parsing metrics: %w", err)
	}
	var n float64
	for _, m := range families[family].GetMetric() {
		n += m.GetGauge().GetValue()
	}
	return n, nil
}

// Sum adds up a per-resource count.
func Sum(counts map[string]float64) float64 {
	var n float64
	for _, v := range counts {
		n += v
	}
	return n
}

// Reconciles reads the reconciles counted so far (controller_runtime_reconcile_total) from the
// operator's metrics endpoint at addr, summed over the samples whose labels match.
func Reconciles(ctx context.Context, addr string, match func(labels map[string]string) bool) (float64, error) {
	raw, err := HTTPGet(ctx, addr, "/metrics")
	if err != nil {
		return 0, err
	}
	counts, err := SumCounter(raw, "controller_runtime_reconcile_total", func(labels map[string]string) (string, bool) {
		return "", match(labels)
	})
	return counts[""], err
}
