package images

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// uncheckedSuffix marks a cached file whose check has not passed yet. A mark rather than a
// "checked" one: files cached before checks were kept apart were all checked, and have none.
const uncheckedSuffix = ".unchecked"

// cached returns the file build writes (given its path), kept in the cache under the hash of
// the files of dir, so that it is built again only when they change; check, when not nil, must
// then pass on it once. A file whose check failed is kept, and checked again the next time
// rather than built again: the builds are reproducible, so a new one would be the same bytes,
// while a check can fail for a reason of the moment (the timeouts of a starved machine).
func (b *Builder) cached(dir, file string, build, check func(path string) *exec.Cmd) (string, error) {
	key, err := hashDir(filepath.Join(b.Repo, dir))
	if err != nil {
		return "", err
	}
	out := filepath.Join(b.Cache, strings.ReplaceAll(dir, "/", "-")+"-"+key, file)
	switch {
	case !exists(out):
		if err := b.buildFile(dir, out, build, check != nil); err != nil {
			return "", err
		}
	case check == nil || !exists(out+uncheckedSuffix):
		b.Log("%s: %s from the cache (%s)", dir, file, filepath.Dir(out))
		return out, nil
	}
	if check == nil {
		return out, nil
	}
	b.Log("%s: checking %s", dir, file)
	if err := run(check(out)); err != nil {
		return "", fmt.Errorf("checking %s of %s (kept; checked again, not built again, next time): %w", file, dir, err)
	}
	return out, os.Remove(out + uncheckedSuffix)
}

// buildFile builds out through a temporary file beside it, marked unchecked before it takes
// its name when it is to be checked: a run stopped between the two checks it next time.
func (b *Builder) buildFile(dir, out string, build func(path string) *exec.Cmd, unchecked bool) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	b.Log("%s: building %s (slow the first time)", dir, filepath.Base(out))
	// The temporary file keeps the name's extension: mmdebstrap picks its output format by it.
	tmp := filepath.Join(filepath.Dir(out), "tmp-"+filepath.Base(out))
	_ = os.RemoveAll(tmp)
	if err := run(build(tmp)); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("building %s of %s: %w", filepath.Base(out), dir, err)
	}
	if unchecked {
		if err := os.WriteFile(out+uncheckedSuffix, nil, 0o644); err != nil {
			return err
		}
	}
	return os.Rename(tmp, out)
}

// run runs cmd with its output on our standard error, where the build's log goes.
func run(cmd *exec.Cmd) error {
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Lock takes the cache for this builder alone until unlock is called: two builds at once (make
// test's early one in the background and make test-real's) would write the same files. The
// second waits, then finds what the first built.
func (b *Builder) Lock() (unlock func(), err error) {
	if err := os.MkdirAll(b.Cache, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(b.Cache, ".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		b.Log("waiting for another images build to finish (it holds %s)", path)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
