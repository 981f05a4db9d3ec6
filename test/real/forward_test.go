package realnode

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// background runs a command that serves until it is stopped (a port-forward), waits for the
// first line of its output that matches re, and returns the line's first submatch. The
// command is killed, by its PID, when the test ends.
func background(t *testing.T, re *regexp.Regexp, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"])
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case v := <-found:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s %s printed no line matching %s within a minute; stderr:\n%s", filepath.Base(name), strings.Join(args, " "), re, stderr.String())
		return ""
	}
}

var forwarding = regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForward runs kubectl port-forward to target (svc/NAME) in ns, as a user outside the
// cluster reaches it, and returns the local port.
func portForward(t *testing.T, ns, target string, port int) string {
	t.Helper()
	return background(t, forwarding, filepath.Join(framework.RepoRoot(), "bin", "kubectl"),
		"port-forward", "-n", ns, "--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
}

// lockedBuffer is a buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
