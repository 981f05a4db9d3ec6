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
// first line of its output that matches re, and returns the line's first submatch.
func background(t *testing.T, re *regexp.Regexp, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env["KUBECONFIG"])
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedBuffer{}
	return serve(t, cmd, out, re)
}

// serve starts cmd, which serves until it is killed (by its PID, when the test ends), and
// returns the first submatch of the first line of lines (one of its output pipes) matching re.
func serve(t *testing.T, cmd *exec.Cmd, lines io.Reader, re *regexp.Regexp) string {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(lines)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, lines)
	}()
	select {
	case v := <-found:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s printed no line matching %s within a minute; stderr:\n%v", strings.Join(cmd.Args, " "), re, cmd.Stderr)
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
