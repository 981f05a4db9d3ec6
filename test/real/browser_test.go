package realnode

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// browser is headless Chromium driven through the DevTools protocol: a page that loads its
// application with scripts over a websocket (the IDE's workbench) is waited for by what it
// renders, which chromium's own --screenshot, taken at the load event, cannot.
type browser struct {
	conn *websocket.Conn
	id   int
}

var devtoolsListening = regexp.MustCompile(`DevTools listening on ws://(127\.0\.0\.1:\d+)/`)

// newBrowser starts chromium (killed by its PID when the test ends) and attaches to its page.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	profile, err := os.MkdirTemp("", "real-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, "--window-size=1280,800", "--remote-debugging-address=127.0.0.1",
		"--remote-debugging-port=0", "about:blank")
	// Its scratch files (org.chromium.*) go to the profile too, which is removed at the end.
	cmd.Env = append(os.Environ(), "TMPDIR="+profile)
	// Its own process group: chromium's helpers (renderer, GPU, zygote) are ended with it, and
	// only then is its profile removed, which they write to until they end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		removeWhenQuiet(profile)
	})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	return attachPage(t, serve(t, cmd, stderr, devtoolsListening))
}

// removeWhenQuiet removes dir, trying again for a few seconds while processes that were
// killed still have files open there.
func removeWhenQuiet(dir string) {
	for i := 0; i < 50 && os.RemoveAll(dir) != nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// attachPage connects to the first page target of the browser at addr.
func attachPage(t *testing.T, addr string) *browser {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		if tg.Type == "page" {
			conn, _, err := websocket.DefaultDialer.Dial(tg.WebSocketDebuggerURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			return &browser{conn: conn}
		}
	}
	t.Fatalf("chromium has no page: %+v", targets)
	return nil
}

// call sends a DevTools command and decodes its result into out (when not nil), skipping the
// events that arrive meanwhile.
func (b *browser) call(method string, params map[string]any, out any) error {
	b.id++
	if err := b.conn.WriteJSON(map[string]any{"id": b.id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	_ = b.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct{ Message string }
		}
		if err := b.conn.ReadJSON(&msg); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if msg.ID != b.id {
			continue
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if out == nil {
			return nil
		}
		return json.Unmarshal(msg.Result, out)
	}
}

// eval evaluates a JavaScript expression in the page and returns its value as a string.
func (b *browser) eval(expr string) (string, error) {
	var res struct {
		Result struct{ Value any } `json:"result"`
	}
	if err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res); err != nil {
		return "", err
	}
	return fmt.Sprint(res.Result.Value), nil
}

// screenshot writes the page as a PNG to path.
func (b *browser) screenshot(path string) error {
	var res struct{ Data string }
	if err := b.call("Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
