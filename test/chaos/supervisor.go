package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// supervisor keeps one operator process running, as a Deployment's kubelet would: one that
// exits (killed, or crashed while the control plane is away) is started again.
type supervisor struct {
	binary, kubeconfig, work string
	args                     []string

	mu       sync.Mutex
	op       *framework.Operator
	runs     int
	stopping bool
	done     chan struct{}
}

func newSupervisor(binary, kubeconfig, work string, args []string) *supervisor {
	return &supervisor{binary: binary, kubeconfig: kubeconfig, work: work, args: args, done: make(chan struct{})}
}

// start starts the operator and waits until it is ready; from then on it is kept running.
func (s *supervisor) start(ctx context.Context) error {
	if err := s.launch(); err != nil {
		return err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.current().WaitReady(readyCtx); err != nil {
		return err
	}
	go s.keepAlive()
	return nil
}

func (s *supervisor) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	op, err := framework.StartOperator(s.binary, s.kubeconfig, filepath.Join(s.work, fmt.Sprintf("operator-%d.log", s.runs)), s.args...)
	if err != nil {
		return err
	}
	s.op = op
	return nil
}

func (s *supervisor) current() *framework.Operator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.op
}

// keepAlive starts the operator again whenever it has exited, a second later.
func (s *supervisor) keepAlive() {
	for {
		select {
		case <-s.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if _, exited := s.current().Exited(); !exited {
			continue
		}
		time.Sleep(time.Second)
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		_ = s.launch()
	}
}

// kill SIGKILLs the running operator and returns when keepAlive has started another: a fault
// ends there, since the restart delay is the supervisor's, not the operator's.
func (s *supervisor) kill(ctx context.Context) time.Time {
	s.mu.Lock()
	op := s.op
	s.mu.Unlock()
	op.Kill()
	for {
		s.mu.Lock()
		restarted := s.op != op
		s.mu.Unlock()
		if restarted || ctx.Err() != nil {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the operator for good.
func (s *supervisor) stop() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	close(s.done)
	op := s.op
	s.mu.Unlock()
	if op != nil {
		_ = op.Stop(time.Minute)
	}
}

// stopOperators ends every operator the run started.
func (c *chaos) stopOperators() {
	if c.sup != nil {
		c.sup.stop()
	}
}
