package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloudspace-dev/cloudspace-operator/pkg/workspacev1"
	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// workspaceNS is where the API creates workspaces (the CSV's --workspace-namespaces).
const workspaceNS = "cloudspace-workspaces"

// ideFolder is the folder the chart tells code-server to open.
const ideFolder = "/home/coder/project"

// checkWorkspace uses a workspace as its user does from outside the cluster: the gRPC API
// through a port-forward, create-and-wait, `kubectl cloudspace ws open` to reach the IDE, a
// password login, the workbench in headless Chromium, and a file that outlives Stop/Start.
func checkWorkspace(t *testing.T, api apiAccess) {
	ensureNamespace(t, workspaceNS)
	apiAddr := "localhost:" + portForward(t, operatorNS, "svc/"+grpcService, 9443)
	c := workspacev1.NewWorkspaceServiceClient(dialAPI(t, api, apiAddr))
	as := func(ctx context.Context, token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	ref := &workspacev1.WorkspaceRef{Namespace: workspaceNS, Name: "real-ide"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(as(context.Background(), api.token), 30*time.Second)
		defer cancel()
		_, _ = c.Delete(ctx, ref)
	})

	base, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctx := as(base, api.token)
	start := time.Now()
	ws, err := c.Create(ctx, &workspacev1.CreateWorkspaceRequest{Wait: true,
		Workspace: &workspacev1.Workspace{Name: ref.Name, Namespace: ref.Namespace, Storage: "1Gi"}})
	if err != nil {
		t.Fatalf("create-and-wait: %v", err)
	}
	t.Logf("create-and-wait returned %s after %s (%s)", ws.GetPhase(), time.Since(start).Round(100*time.Millisecond), ws.GetMessage())
	if ws.GetPhase() != "Running" {
		t.Fatalf("create-and-wait returned phase %s: %s", ws.GetPhase(), ws.GetMessage())
	}
	if _, err := c.GetAccess(as(base, api.other), ref); status.Code(err) != codes.NotFound && status.Code(err) != codes.PermissionDenied {
		t.Errorf("another user's GetAccess: %v, want NotFound or PermissionDenied and no password", err)
	}
	access, err := c.GetAccess(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	ide := wsOpen(t, api, apiAddr, ref.Name)
	session := checkLogin(t, ide, access.GetPassword())
	opened := time.Since(start)
	checkIDEContainer(t, ref.Name)
	screenshotWorkbench(t, ide, session)
	t.Logf("create-and-wait to a logged-in IDE: %s", opened.Round(100*time.Millisecond))
	checkFilesSurviveRestart(t, c, ctx, ref)
}

// dialAPI connects to the workspace API at addr over TLS, verified against the API's CA.
// apiClient is a workspace API client through a port-forward to the API's Service.
func apiClient(t *testing.T, api apiAccess) workspacev1.WorkspaceServiceClient {
	t.Helper()
	return workspacev1.NewWorkspaceServiceClient(dialAPI(t, api, "localhost:"+portForward(t, operatorNS, "svc/"+grpcService, 9443)))
}

// bearerContext is a context carrying api's token as its bearer, ended after timeout.
func bearerContext(api apiAccess, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+api.token), timeout)
}

func dialAPI(t *testing.T, api apiAccess, addr string) *grpc.ClientConn {
	t.Helper()
	pemCA, err := os.ReadFile(api.ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

var openedURL = regexp.MustCompile(`^URL:\s+(http://127\.0\.0\.1:\d+/)`)

// wsOpen runs `kubectl cloudspace ws open` as docs/api.md ("kubectl cloudspace") tells users to, and returns the local
// URL it forwards to the IDE.
func wsOpen(t *testing.T, api apiAccess, apiAddr, name string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(api.token), 0o600); err != nil {
		t.Fatal(err)
	}
	return background(t, openedURL, filepath.Join(framework.RepoRoot(), "bin", "kubectl-cloudspace"),
		"ws", "open", name, "--api", apiAddr, "--api-ca-file", api.ca, "--api-token-file", tokenFile, "--ws-namespace", workspaceNS)
}

// sessionCookie is code-server's login cookie.
const sessionCookie = "code-server-session"

// checkLogin logs into code-server with the password (and fails to with a wrong one), and
// returns the session cookie, with which the IDE serves its workbench.
func checkLogin(t *testing.T, ide, password string) *http.Cookie {
	t.Helper()
	noRedirect := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(pw string) *http.Cookie {
		resp, err := noRedirect.PostForm(ide+"login", url.Values{"password": {pw}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		for _, ck := range resp.Cookies() {
			if ck.Name == sessionCookie && ck.Value != "" {
				return ck
			}
		}
		return nil
	}
	// The right password first: code-server limits wrong attempts per minute.
	session := login(password)
	if session == nil {
		t.Fatal("the workspace's password gave no session cookie")
	}
	if login(password+"x") != nil {
		t.Error("a wrong password gave a session cookie")
	}
	req, _ := http.NewRequest(http.MethodGet, ide, nil)
	req.AddCookie(session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := httputil.DumpResponse(resp, true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "workbench") {
		t.Fatalf("GET / with the session: %d, no workbench:\n%.2000s", resp.StatusCode, body)
	}
	return session
}

// checkIDEContainer: the folder the IDE opens exists on a fresh volume (else code-server shows
// "Workspace does not exist"), and HOME is set for images without a home entry.
func checkIDEContainer(t *testing.T, name string) {
	t.Helper()
	out := kubectlExec(t, name, `printf '%s\n' "$HOME"; test -d `+ideFolder+` && echo folder-exists`)
	if out != "/home/coder\nfolder-exists\n" {
		t.Errorf("in the IDE container: %q, want HOME=/home/coder and %s existing", out, ideFolder)
	}
}

// kubectlExec runs a shell command in the workspace's IDE container, as its terminal does.
func kubectlExec(t *testing.T, name, script string) string {
	t.Helper()
	return execIn(t, workspaceNS, "deploy/"+name, "ide", "sh", script)
}

// execIn runs script with shell in the container of target (kubectl's TYPE/NAME) in ns.
func execIn(t *testing.T, ns, target, container, shell, script string) string {
	t.Helper()
	out, err := kubectlCmd("exec", "-n", ns, target, "-c", container, "--", shell, "-c", script).Output()
	if err != nil {
		t.Fatalf("kubectl exec %q: %v (%s)", script, err, out)
	}
	return string(out)
}

// screenshotWorkbench has headless Chromium open the IDE with the session cookie (as the
// browser holds it after the login form), waits for the workbench to render the project
// folder, checks it does not say the folder is missing, and keeps a screenshot in
// bin/test-artifacts. A blank or error page is a few colours; the workbench is many.
func screenshotWorkbench(t *testing.T, ide string, session *http.Cookie) {
	t.Helper()
	b := newBrowser(t)
	if err := b.call("Network.setCookie", map[string]any{"name": session.Name, "value": session.Value, "url": ide}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.call("Page.navigate", map[string]any{"url": ide}, nil); err != nil {
		t.Fatal(err)
	}
	// The explorer shows the opened folder's name once the workbench has connected to the IDE.
	var text string
	waitFor(t, 2*time.Minute, "the workbench showing the project folder", func(context.Context) error {
		var err error
		text, err = b.eval(`document.querySelector('.monaco-workbench .explorer-folders-view, .monaco-workbench .explorer-viewlet') ? document.body.innerText : ''`)
		if err != nil {
			return err
		}
		if !strings.Contains(strings.ToLower(text), "project") {
			return fmt.Errorf("the page shows %.300q", text)
		}
		return nil
	})
	if strings.Contains(text, "does not exist") {
		t.Errorf("the workbench says the folder does not exist: %.500q", text)
	}
	keepScreenshot(t, b, "workspace-workbench.png")
}

// keepScreenshot writes what b shows to bin/test-artifacts/name; a blank or error page is a
// few colours, a page that rendered its application many.
func keepScreenshot(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(), "bin", "test-artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, name)
	if err := b.screenshot(shot); err != nil {
		t.Fatal(err)
	}
	colours := pngColours(t, shot)
	if colours < 32 {
		t.Errorf("the screenshot %s has %d colours: not the page", shot, colours)
	}
	t.Logf("screenshot: %s (%d colours)", shot, colours)
}

// pngColours counts the distinct colours of a PNG, up to 1000.
func pngColours(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 1000; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

// checkFilesSurviveRestart writes a file in the IDE, stops and starts the workspace through
// the API, and reads the file back from the new IDE pod.
func checkFilesSurviveRestart(t *testing.T, c workspacev1.WorkspaceServiceClient, ctx context.Context, ref *workspacev1.WorkspaceRef) {
	t.Helper()
	note := fmt.Sprintf("written at %s", time.Now().Format(time.RFC3339Nano))
	kubectlExec(t, ref.Name, "printf '%s' '"+note+"' > "+ideFolder+"/note.txt")
	if _, err := c.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "the workspace Stopped", func(context.Context) error {
		ws, err := c.Get(ctx, ref)
		if err != nil {
			return err
		}
		if ws.GetPhase() != "Stopped" {
			return fmt.Errorf("phase %s: %s", ws.GetPhase(), ws.GetMessage())
		}
		return nil
	})
	start := time.Now()
	ws, err := c.Start(ctx, &workspacev1.StartWorkspaceRequest{Ref: ref, Wait: true})
	if err != nil || ws.GetPhase() != "Running" {
		t.Fatalf("start-and-wait: %v (%s)", err, ws.GetMessage())
	}
	t.Logf("start-and-wait: %s", time.Since(start).Round(100*time.Millisecond))
	if got := kubectlExec(t, ref.Name, "cat "+ideFolder+"/note.txt"); got != note {
		t.Errorf("after Stop/Start the file holds %q, want %q", got, note)
	}
}
