// Command chaos breaks things while the operator works, on a private embedded (KWOK) cluster,
// and checks that it recovers by itself: the operator is SIGKILLed at random moments while it
// reconciles resources of a pure chart kind (Demo) and GenericDaemons, the whole control plane
// is stopped and started once, and workspaces are created through the API meanwhile. Then every
// resource must be Ready, every child must have exactly one live controller owner, a quiet
// window must write nothing, and deleting everything must leave no child. A second phase runs
// two replicas with leader election and kills the leader. It prints its figures (and JSON),
// stops by itself within -timeout, and exits 1 when a check fails.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

type options struct {
	demos, daemons, workspaces int
	kills                      int
	killMin, killMax           time.Duration
	outage                     time.Duration
	quiet                      time.Duration
	leader                     bool
	timeout                    time.Duration
	operator                   string
	jsonPath                   string
	keep                       bool
	debug                      bool
	maxRatio                   float64
	slack                      time.Duration
}

// Report is what one run measured and found.
type Report struct {
	Demos, Daemons, Workspaces int
	// UndisturbedSeconds is how long the same resources take to become Ready with no fault.
	UndisturbedSeconds float64 `json:"undisturbedSeconds"`
	// UndisturbedChangeSeconds is how long they take to become Ready again after a change of
	// every spec, with no fault: the work the storm's last fault lands on.
	UndisturbedChangeSeconds float64 `json:"undisturbedChangeSeconds"`
	Kills                    int     `json:"kills"`
	ControlPlaneOutage       float64 `json:"controlPlaneOutageSeconds"`
	// ConvergedAfterLastFault is the time from the last fault until every resource was Ready.
	ConvergedAfterLastFault float64            `json:"convergedAfterLastFaultSeconds"`
	ConvergenceRatio        float64            `json:"convergenceRatioToUndisturbed"`
	Orphans                 int                `json:"orphans"`
	Duplicates              int                `json:"duplicates"`
	QuietWrites             map[string]float64 `json:"quietWindowWrites"`
	Leftovers               int                `json:"leftoversAfterDelete"`
	WorkspaceCalls          WorkspaceCalls     `json:"workspaceCalls"`
	Leader                  *LeaderReport      `json:"leaderElection,omitempty"`
	Failures                []string           `json:"failures"`
}

func main() {
	var o options
	flag.IntVar(&o.demos, "demos", 200, "resources of the pure chart kind Demo")
	flag.IntVar(&o.daemons, "daemons", 50, "GenericDaemons")
	flag.IntVar(&o.workspaces, "workspaces", 10, "create-and-wait calls through the API during the faults")
	flag.IntVar(&o.kills, "kills", 10, "SIGKILLs of the operator")
	flag.DurationVar(&o.killMin, "kill-min", 500*time.Millisecond, "shortest time between kills")
	flag.DurationVar(&o.killMax, "kill-max", 3*time.Second, "longest time between kills")
	flag.DurationVar(&o.outage, "outage", 5*time.Second, "how long the control plane is down")
	flag.DurationVar(&o.quiet, "quiet", 10*time.Second, "the quiet window after convergence, which must write nothing")
	flag.BoolVar(&o.leader, "leader", true, "also run two replicas with leader election and kill the leader")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "the whole run's limit")
	flag.StringVar(&o.operator, "operator", filepath.Join(framework.RepoRoot(), "bin", "manager"), "operator binary")
	flag.StringVar(&o.jsonPath, "json", "", "also write the report as JSON to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the cluster and logs after the run")
	flag.Float64Var(&o.maxRatio, "max-ratio", 1.5, "the most convergence after the last fault may take, as a multiple of the undisturbed change")
	flag.DurationVar(&o.slack, "slack", 0, "added to that most, for short runs whose few seconds are mostly noise")
	flag.BoolVar(&o.debug, "debug", false, "operators log at debug level (every reconcile)")
	flag.Parse()
	rep, err := run(o)
	if rep != nil {
		print(rep)
		if o.jsonPath != "" {
			if data, jerr := json.MarshalIndent(rep, "", "  "); jerr == nil {
				_ = os.WriteFile(o.jsonPath, data, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	if len(rep.Failures) > 0 {
		os.Exit(1)
	}
}

func run(o options) (*Report, error) {
	// Interrupted, it still stops the operators and the cluster it started.
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sigCtx, o.timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "cloudspace-chaos-")
	if err != nil {
		return nil, err
	}
	fmt.Printf("chaos: a private cluster in %s\n", work)
	cluster, err := framework.StartCluster(ctx, filepath.Join(work, "cluster"), fmt.Sprintf("chaos-%d", os.Getpid()))
	if err != nil {
		return nil, err
	}
	c, err := newChaos(ctx, cluster, o, work)
	if err == nil {
		err = c.run(ctx)
	}
	c.stopOperators()
	_ = cluster.Stop()
	if !o.keep && err == nil && len(c.report.Failures) == 0 {
		_ = os.RemoveAll(work)
	} else {
		fmt.Printf("chaos: logs kept in %s\n", work)
	}
	return c.report, err
}

// print writes the report as a table.
func print(r *Report) {
	fmt.Printf("\nchaos: %d Demos and %d GenericDaemons, %d workspaces through the API\n\n", r.Demos, r.Daemons, r.Workspaces)
	rows := [][2]string{
		{"undisturbed: until all Ready", fmt.Sprintf("%.1f s", r.UndisturbedSeconds)},
		{"undisturbed: Ready again after a change", fmt.Sprintf("%.1f s", r.UndisturbedChangeSeconds)},
		{"operator SIGKILLs", fmt.Sprint(r.Kills)},
		{"control plane outage", fmt.Sprintf("%.1f s", r.ControlPlaneOutage)},
		{"converged after the last fault", fmt.Sprintf("%.1f s (%.2fx the undisturbed change)", r.ConvergedAfterLastFault, r.ConvergenceRatio)},
		{"children without exactly one live owner", fmt.Sprintf("%d orphans, %d with several", r.Orphans, r.Duplicates)},
		{"writes in the quiet window", fmt.Sprint(framework.Sum(r.QuietWrites))},
		{"children left after delete", fmt.Sprint(r.Leftovers)},
		{"create-and-wait calls", r.WorkspaceCalls.String()},
	}
	if r.Leader != nil {
		rows = append(rows, [2]string{"leader killed: takeover", fmt.Sprintf("%.1f s (lease %s)", r.Leader.TakeoverSeconds, r.Leader.LeaseDuration)},
			[2]string{"leader killed: API unavailable", fmt.Sprintf("%.1f s at most", r.Leader.APIUnavailableSeconds)},
			[2]string{"leader killed: writes by the new leader", fmt.Sprint(framework.Sum(r.Leader.WritesAfterTakeover))})
	}
	for _, row := range rows {
		fmt.Printf("%-42s %s\n", row[0], row[1])
	}
	if len(r.Failures) == 0 {
		fmt.Println("\nchaos: every check passed")
		return
	}
	fmt.Println("\nchaos: FAILED")
	for _, f := range r.Failures {
		fmt.Println("  -", f)
	}
}
