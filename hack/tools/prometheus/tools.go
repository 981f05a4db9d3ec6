//go:build tools

// Package tools pins the Prometheus release whose promtool checks and tests the operator's
// alerting rules (hack/tools.sh promtool), and whose server scrapes the operator on the real
// cluster (hack/tools.sh prometheus).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
