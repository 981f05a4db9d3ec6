package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the web backend's database, for its schema and rows

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// seedWebserverCommit is the tutorial's web backend's last commit that speaks the legacy proto
// we serve (proto/pb/service.proto).
const seedWebserverCommit = "5cbb8f2"

// thirdPartyDir holds the clients of ours that are someone else's code, kept next to the
// project (CLOUDSPACE_THIRD_PARTY names another place): never copied into it, only built in
// tests.
func thirdPartyDir(t *testing.T) string {
	t.Helper()
	dirs := []string{os.Getenv("CLOUDSPACE_THIRD_PARTY")}
	// Next to the project, or next to the project a clone was made from (CI's clean clone of a
	// local repository): shared/third-party in a directory above it.
	roots := []string{framework.RepoRoot()}
	if out, err := exec.Command("git", "-C", roots[0], "remote", "get-url", "origin").Output(); err == nil && filepath.IsAbs(strings.TrimSpace(string(out))) {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	for _, root := range roots {
		for d := root; d != filepath.Dir(d); d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(filepath.Dir(d), "shared", "third-party"))
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "cloud-ide-webserver.bundle")); d != "" && err == nil {
			return d
		}
	}
	t.Fatalf("no cloud-ide-webserver.bundle in %s: set CLOUDSPACE_THIRD_PARTY to the directory that holds it", strings.Join(dirs[1:], ", "))
	return ""
}

// buildSeedWebserver clones the web backend's git bundle, checks out its commit and builds it
// (its dependencies come from the Go module proxy), as its README says.
func buildSeedWebserver(t *testing.T) string {
	t.Helper()
	src, out := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "cloud-ide-webserver")
	steps := [][]string{
		{"git", "clone", "-q", filepath.Join(thirdPartyDir(t), "cloud-ide-webserver.bundle"), src},
		{"git", "-C", src, "checkout", "-q", seedWebserverCommit},
		{"go", "-C", src, "build", "-o", out, "./cmd/server"},
	}
	for _, step := range steps {
		cmd := exec.Command(step[0], step[1:]...)
		// Its own module, as its Dockerfile builds it (no cgo); GOFLAGS stays the suite's.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(step, " "), err, b)
		}
	}
	return out
}

// startMariaDB runs MariaDB (Debian's mariadbd) on 127.0.0.1 with a data directory of the
// test's, loads the web backend's schema and rows, and returns the DSN of its database. It runs
// without grant tables: the only client is the test's, and its port is on the loopback.
func startMariaDB(t *testing.T, rows string) string {
	t.Helper()
	dir := t.TempDir()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "mariadbd.log")
	stop := startProcess(t, logPath, dir, "mariadbd", "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--user=root",
		"--skip-grant-tables", "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port), "--socket="+filepath.Join(dir, "sock"),
		"--pid-file="+filepath.Join(dir, "pid"), "--skip-log-bin", "--innodb-buffer-pool-size=32M")
	t.Cleanup(stop)
	server := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	schema, err := os.ReadFile(filepath.Join(thirdPartyDir(t), "cloud-ide-webserver-schema.sql"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "MariaDB answering, with the web backend's schema and rows", func(ctx context.Context) error {
		db, err := openDB(ctx, server+"?multiStatements=true")
		if err != nil {
			return fmt.Errorf("%w (its log: %s)", err, tail(logPath))
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, string(schema)+"\n"+rows); err != nil {
			t.Fatalf("loading the schema and rows: %v", err)
		}
		return nil
	})
	return server + "cloudcode?charset=utf8mb4&parseTime=true&loc=Local"
}

// startSeedWebserver runs the web backend with a conf/application.yaml that names the
// database, Redis and the operator's legacy listener, and waits for its HTTP API.
func startSeedWebserver(t *testing.T, binary, dsn, redisAddr, grpcAddr string) *seedWeb {
	t.Helper()
	dir := t.TempDir()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`server: {host: "127.0.0.1", port: %d, name: cloud-ide-webserver, mode: dev}
mysql: {dataSourceName: %q, maxOpenConns: 4, maxIdleConns: 2}
logger: {level: DEBUG, toFile: false}
redis: {addr: %q, password: "", db: 0, poolSize: 4, minIdleConns: 1}
grpc: {addr: %q}
`, port, dsn, redisAddr, grpcAddr)
	if err := os.MkdirAll(filepath.Join(dir, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conf", "application.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "webserver.log")
	t.Cleanup(startProcess(t, logPath, dir, binary))
	web := &seedWeb{base: fmt.Sprintf("http://127.0.0.1:%d", port), log: func() string { return tail(logPath) }}
	waitFor(t, time.Minute, "the web backend's HTTP API", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, "GET", web.base+"/uaval?username=tester", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("%w (its log: %s)", err, web.log())
		}
		return resp.Body.Close()
	})
	return web
}

// startProcess starts a program in dir with its output in logPath and returns what stops it
// (SIGTERM, then SIGKILL after 10 s).
func startProcess(t *testing.T, logPath, dir, name string, args ...string) func() {
	t.Helper()
	p, err := framework.StartProcessIn(dir, name, logPath, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = p.Stop(10 * time.Second) }
}

// tail is the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
