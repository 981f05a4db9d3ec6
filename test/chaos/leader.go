package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// LeaderReport is what killing the leader of two replicas showed.
type LeaderReport struct {
	// LeaseDuration is controller-runtime's: how long a dead leader's lease holds.
	LeaseDuration string `json:"leaseDuration"`
	// TakeoverSeconds is from the leader's SIGKILL until the other replica leads.
	TakeoverSeconds float64 `json:"takeoverSeconds"`
	// APIUnavailableSeconds is the longest stretch in which the survivor's API did not answer.
	APIUnavailableSeconds float64 `json:"apiUnavailableSeconds"`
	// WritesAfterTakeover are the new leader's writes over resources the old one had made Ready.
	WritesAfterTakeover map[string]float64 `json:"writesAfterTakeover"`
}

const leaseDuration = 15 * time.Second // controller-runtime's default

// replica is one of two operators with leader election, with its own addresses.
type replica struct {
	op          *framework.Operator
	metricsAddr string
	apiAddr     string
}

// leaderElection runs two replicas with leader election over the Demos and GenericDaemons,
// kills the leader and measures the takeover, the survivor's API meanwhile, and the writes the
// new leader makes over resources that were already Ready.
func (c *chaos) leaderElection(ctx context.Context) (*LeaderReport, error) {
	fmt.Println("chaos: two replicas with leader election; the leader is killed")
	r := &LeaderReport{LeaseDuration: leaseDuration.String()}
	replicas, err := c.startReplicas(ctx)
	defer func() {
		for _, rep := range replicas {
			_ = rep.op.Stop(time.Minute)
		}
	}()
	if err != nil {
		return r, err
	}
	if err := c.createResources(ctx, stormy); err != nil {
		return r, err
	}
	if err := c.waitAllReady(ctx, stormy); err != nil {
		return r, err
	}
	leader, survivor, err := c.leaderOf(ctx, replicas)
	if err != nil {
		return r, err
	}
	before, err := framework.APIWrites(ctx, c.cs.RESTClient(), writtenResources...)
	if err != nil {
		return r, err
	}
	outage := c.watchAPI(ctx, survivor.apiAddr)
	killed := time.Now()
	leader.op.Kill()
	if err := waitLeading(ctx, survivor, 3*leaseDuration); err != nil {
		return r, err
	}
	r.TakeoverSeconds = time.Since(killed).Seconds()
	if err := c.waitReconciled(ctx, survivor, c.o.demos+c.o.daemons); err != nil {
		return r, err
	}
	time.Sleep(c.o.quiet)
	r.APIUnavailableSeconds = outage().Seconds()
	if r.WritesAfterTakeover, err = c.writesSince(ctx, before, killed); err != nil {
		return r, err
	}
	c.judgeLeader(r)
	return r, c.deleteAll(ctx, stormy)
}

// judgeLeader records what the leader phase got wrong.
func (c *chaos) judgeLeader(r *LeaderReport) {
	// The survivor tries every 2 s with up to 120% jitter (controller-runtime's retry period),
	// so it may lead up to 4.4 s after the lease expired, then start its controllers.
	if r.TakeoverSeconds > leaseDuration.Seconds()+10 {
		c.report.Failures = append(c.report.Failures, fmt.Sprintf("the takeover took %.1f s, more than the lease (%s) and 10 s", r.TakeoverSeconds, leaseDuration))
	}
	if n := framework.Sum(r.WritesAfterTakeover); n > 0 {
		c.report.Failures = append(c.report.Failures, fmt.Sprintf("the new leader wrote %v times over Ready resources: %v", n, r.WritesAfterTakeover))
	}
	if r.APIUnavailableSeconds > 0 {
		c.report.Failures = append(c.report.Failures, fmt.Sprintf("the survivor's API did not answer for %.1f s", r.APIUnavailableSeconds))
	}
}

func (c *chaos) startReplicas(ctx context.Context) ([]*replica, error) {
	var out []*replica
	for i := range 2 {
		metricsPort, err := framework.FreePort()
		if err != nil {
			return out, err
		}
		apiPort, err := framework.FreePort()
		if err != nil {
			return out, err
		}
		rep := &replica{metricsAddr: fmt.Sprintf("127.0.0.1:%d", metricsPort), apiAddr: fmt.Sprintf("127.0.0.1:%d", apiPort)}
		args := c.operatorArgs(append(c.api.args, "--leader-elect=true", "--grpc-bind-address="+rep.apiAddr,
			"--metrics-bind-address="+rep.metricsAddr, "--metrics-secure=false")...)
		log := filepath.Join(c.work, fmt.Sprintf("replica-%d.log", i))
		if rep.op, err = framework.StartOperator(c.o.operator, c.cluster.Kubeconfig, log, args...); err != nil {
			return out, err
		}
		out = append(out, rep)
	}
	for _, rep := range out {
		readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := rep.op.WaitReady(readyCtx)
		cancel()
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// leaderOf waits until one of the replicas leads and returns it and the other.
func (c *chaos) leaderOf(ctx context.Context, replicas []*replica) (leader, other *replica, err error) {
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*leaseDuration, true, func(ctx context.Context) (bool, error) {
		for i, rep := range replicas {
			if leading(ctx, rep) {
				leader, other = rep, replicas[1-i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("no replica leads: %w", err)
	}
	return leader, other, nil
}

// leading reads controller-runtime's leader_election_master_status from a replica's metrics.
func leading(ctx context.Context, rep *replica) bool {
	raw, err := framework.HTTPGet(ctx, rep.metricsAddr, "/metrics")
	if err != nil {
		return false
	}
	n, err := framework.SumGauge(raw, "leader_election_master_status")
	return err == nil && n > 0
}

func waitLeading(ctx context.Context, rep *replica, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return leading(ctx, rep), nil
	})
}

// waitReconciled waits until the replica has reconciled n resources successfully.
func (c *chaos) waitReconciled(ctx context.Context, rep *replica, n int) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		done, err := framework.Reconciles(ctx, rep.metricsAddr, func(l map[string]string) bool { return l["result"] == "success" })
		return err == nil && done >= float64(n), nil
	})
}

// watchAPI calls List on the API at addr every 200 ms; stop returns the longest stretch of
// calls that failed.
func (c *chaos) watchAPI(ctx context.Context, addr string) (stop func() time.Duration) {
	conn, err := c.api.dial(addr)
	if err != nil {
		return func() time.Duration { return time.Hour }
	}
	api := workspacev1.NewWorkspaceServiceClient(conn)
	done := make(chan struct{})
	var mu sync.Mutex
	var longest time.Duration
	go func() {
		var failingSince time.Time
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			callCtx, cancel := context.WithTimeout(asUser(ctx), time.Second)
			_, err := api.List(callCtx, &workspacev1.ListWorkspacesRequest{})
			cancel()
			mu.Lock()
			switch {
			case err != nil && failingSince.IsZero():
				failingSince = time.Now()
			case err == nil && !failingSince.IsZero():
				longest = max(longest, time.Since(failingSince))
				failingSince = time.Time{}
			}
			mu.Unlock()
		}
	}()
	return func() time.Duration {
		close(done)
		conn.Close()
		mu.Lock()
		defer mu.Unlock()
		return longest
	}
}
