package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Operator is the operator binary running as a child process.
type Operator struct {
	ProbeAddr string
	// MetricsAddr is where the operator serves metrics, when the caller enabled them.
	MetricsAddr string
	// PprofAddr serves /debug/pprof, for goroutine dumps when a test fails.
	PprofAddr string
	LogPath   string
	cmd       *exec.Cmd
	done      chan error
}

// StartOperator runs binary against kubeconfig with the repository's watches.yaml, probes on a
// free 127.0.0.1 port, and its log in logPath. extraArgs are appended to the command line.
func StartOperator(binary, kubeconfig, logPath string, extraArgs ...string) (*Operator, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	pprofPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	o := &Operator{
		ProbeAddr: fmt.Sprintf("127.0.0.1:%d", port), PprofAddr: fmt.Sprintf("127.0.0.1:%d", pprofPort),
		LogPath: logPath, done: make(chan error, 1),
	}
	args := append([]string{
		"--health-probe-bind-address=" + o.ProbeAddr,
		"--pprof-bind-address=" + o.PprofAddr,
		"--leader-elect=false",
		"--watches-file=" + filepath.Join(RepoRoot(), "watches.yaml"),
		"--zap-devel=false",
	}, extraArgs...)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	o.cmd = exec.Command(binary, args...)
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	o.cmd.Stdout, o.cmd.Stderr = logFile, logFile
	if err := o.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() { o.done <- o.cmd.Wait(); logFile.Close() }()
	return o, nil
}

// PID is the operator's process id.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// WaitReady waits until /readyz answers 200, failing early if the process exits.
func (o *Operator) WaitReady(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-o.done:
			o.done <- err
			return false, fmt.Errorf("operator exited before it was ready: %v (log: %s)", err, o.LogPath)
		default:
		}
		code, err := o.Probe(ctx, "/readyz")
		return err == nil && code == http.StatusOK, nil
	})
}

// Probe returns the HTTP status of a probe path such as /healthz.
func (o *Operator) Probe(ctx context.Context, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.ProbeAddr+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// DumpGoroutines writes the operator's goroutine stacks next to its log and returns the path.
func (o *Operator) DumpGoroutines(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.PprofAddr+"/debug/pprof/goroutine?debug=2", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	path := o.LogPath + ".goroutines"
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return path, err
}

// Stop sends SIGTERM and waits for the exit; it returns the process's exit error, if any.
func (o *Operator) Stop(timeout time.Duration) error {
	if err := o.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-o.done:
		o.done <- err
		return err
	case <-time.After(timeout):
		_ = o.cmd.Process.Kill()
		return fmt.Errorf("operator did not stop within %s of SIGTERM", timeout)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
