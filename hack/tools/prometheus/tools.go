//go:build tools

// Package tools pins the Prometheus release whose promtool checks and tests the operator's
// alerting rules (hack/tools.sh promtool).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
