package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCachedBuildsOnceAndChecksUntilPassed: a file is built once; a failed check keeps it and
// the next run checks it again without building; once passed, neither runs again; a failed
// build leaves nothing behind.
func TestCachedBuildsOnceAndChecksUntilPassed(t *testing.T) {
	repo, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "img", "build.sh"), []byte("echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Builder{Repo: repo, Cache: filepath.Join(work, "cache"), Log: t.Logf}
	runs := filepath.Join(work, "runs")
	pass := filepath.Join(work, "pass")
	// Each command notes its run in the runs file; the check passes once the pass file exists.
	build := func(out string) *exec.Cmd {
		return exec.Command("sh", "-c", `echo build >>"$1" && echo data >"$2"`, "sh", runs, out)
	}
	check := func(out string) *exec.Cmd {
		return exec.Command("sh", "-c", `echo check >>"$1" && grep -q data "$3" && test -f "$2"`, "sh", runs, pass, out)
	}
	steps := []struct {
		name    string
		before  func()
		wantErr string
		want    string // the commands run by this step
	}{
		{name: "built, check fails", wantErr: "checked again, not built again", want: "build check"},
		{name: "checked again only", before: func() { touch(t, pass) }, want: "check"},
		{name: "neither once checked", want: ""},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		_ = os.Remove(runs)
		out, err := b.cached("img", "file.tar", build, check)
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Errorf("%s: error %v, want one saying %q", s.name, err, s.wantErr)
			}
		} else if err != nil {
			t.Errorf("%s: %v", s.name, err)
		} else if data, err := os.ReadFile(out); err != nil || string(data) != "data\n" {
			t.Errorf("%s: the cached file holds %q (%v), want what the build wrote", s.name, data, err)
		}
		if got := strings.Join(strings.Fields(readOrEmpty(runs)), " "); got != s.want {
			t.Errorf("%s: ran %q, want %q", s.name, got, s.want)
		}
	}

	failing := func(out string) *exec.Cmd { return exec.Command("sh", "-c", `echo half >"$1"; exit 3`, "sh", out) }
	if err := os.WriteFile(filepath.Join(repo, "img", "build.sh"), []byte("exit 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.cached("img", "file.tar", failing, check); err == nil || !strings.Contains(err.Error(), "building file.tar of img") {
		t.Errorf("a failed build: error %v, want one naming the file and its directory", err)
	}
	key, err := hashDir(filepath.Join(repo, "img"))
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(b.Cache, "img-"+key)); len(left) > 0 {
		t.Errorf("a failed build left %d files in the cache, first %s", len(left), left[0].Name())
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readOrEmpty(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}
