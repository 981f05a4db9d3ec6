package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Operator is the operator binary running as a child process.
type Operator struct {
	*Process
	ProbeAddr string
	// MetricsAddr is where the operator serves metrics, when the caller enabled them.
	MetricsAddr string
	// PprofAddr serves /debug/pprof, for goroutine dumps when a test fails.
	PprofAddr string
}

// DemoPort is the port test/testdata/watches.yaml gives the Demo kind, through ${DEMO_PORT}.
const DemoPort = "8080"

// StartOperator runs binary against kubeconfig with the repository's watches.yaml, probes on a
// free 127.0.0.1 port, and its log in logPath. extraArgs are appended to the command line.
func StartOperator(binary, kubeconfig, logPath string, extraArgs ...string) (*Operator, error) {
	taken := portsIn(extraArgs)
	port, err := freePortExcept(taken, FreePort)
	if err != nil {
		return nil, err
	}
	taken[port] = true
	pprofPort, err := freePortExcept(taken, FreePort)
	if err != nil {
		return nil, err
	}
	o := &Operator{ProbeAddr: fmt.Sprintf("127.0.0.1:%d", port), PprofAddr: fmt.Sprintf("127.0.0.1:%d", pprofPort)}
	args := append([]string{
		"--health-probe-bind-address=" + o.ProbeAddr,
		"--pprof-bind-address=" + o.PprofAddr,
		"--leader-elect=false",
		"--watches-file=" + filepath.Join(RepoRoot(), "watches.yaml"),
		"--zap-devel=false",
	}, extraArgs...)
	// DEMO_PORT is read by test/testdata/watches.yaml, whose Demo kind every operator test serves.
	env := []string{"KUBECONFIG=" + kubeconfig, "DEMO_PORT=" + DemoPort}
	if o.Process, err = StartProcess(binary, logPath, env, args...); err != nil {
		return nil, err
	}
	return o, nil
}

// WaitReady waits until /readyz answers 200, failing early if the process exits.
func (o *Operator) WaitReady(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err, exited := o.Exited(); exited {
			return false, fmt.Errorf("operator exited before it was ready: %v (log: %s)", err, o.LogPath)
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

// portsIn are the ports of the 127.0.0.1 addresses args name. An operator started again keeps
// the listeners the test gave it (the API, the legacy listener), whose ports are free while it
// is down: a port picked for its probes then must not be one of them.
func portsIn(args []string) map[int]bool {
	ports := map[int]bool{}
	for _, m := range loopbackPort.FindAllStringSubmatch(strings.Join(args, " "), -1) {
		if p, err := strconv.Atoi(m[1]); err == nil {
			ports[p] = true
		}
	}
	return ports
}

var loopbackPort = regexp.MustCompile(`127\.0\.0\.1:(\d+)`)

// freePortExcept is a port from free that is not taken; free is asked a few times at most.
func freePortExcept(taken map[int]bool, free func() (int, error)) (int, error) {
	for range 20 {
		port, err := free()
		if err != nil || !taken[port] {
			return port, err
		}
	}
	return 0, fmt.Errorf("no free port outside the %d the operator's arguments take", len(taken))
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

// HTTPGet reads http://addr+path, for the plain-HTTP endpoints tests give an operator (probes,
// metrics with --metrics-secure=false); any status but 200 is an error.
func HTTPGet(ctx context.Context, addr, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, err
}
