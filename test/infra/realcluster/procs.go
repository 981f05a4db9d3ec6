package realcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is one long-running process of the cluster.
type daemon struct {
	name string
	// bin is the program, an absolute path.
	bin  string
	args []string
	env  []string
	// node names the node (or the fabric) in whose namespaces it runs; "" runs it in the host's
	// (the forwarder and the holders).
	node string
}

// start runs d in the background, in a session of its own so that it outlives make, with its
// output in logs/NAME.log and its PID in pids/NAME.
func (l Layout) start(d daemon) error {
	if err := os.MkdirAll(l.Path("logs"), 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(l.Path("logs", d.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	argv := append([]string{d.bin}, d.args...)
	if d.node != "" {
		holder, err := l.pid(holderName(d.node))
		if err != nil {
			return fmt.Errorf("starting %s: the holder of %s: %w", d.name, d.node, err)
		}
		ns := []string{"nsenter", "--target", strconv.Itoa(holder), "--net"}
		if d.node != fabric {
			ns = append(ns, "--mount")
		}
		argv = append(append(ns, "--"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + l.Bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + l.Path("state", "home")}, d.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = l.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", d.name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return l.writePID(d.name, pid)
}

func (l Layout) writePID(name string, pid int) error {
	if err := os.MkdirAll(l.Path("pids"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(l.Path("pids", name), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// running lists the daemons whose recorded process is alive, by name.
func (l Layout) running() map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir(l.Path("pids"))
	for _, e := range entries {
		data, err := os.ReadFile(l.Path("pids", e.Name()))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(trimNewline(data)))
		if err == nil && alive(pid, l.Dir, l.Bin) {
			out[e.Name()] = pid
		}
	}
	return out
}

// alive tells whether pid is a live process of this cluster: its command line names the
// cluster's directory or its binaries, so a recycled PID is never taken for ours.
func alive(pid int, markers ...string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && isZombie(stat) {
		return false
	}
	for _, m := range markers {
		if bytes.Contains(cmdline, []byte(m)) {
			return true
		}
	}
	return false
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// stop sends SIGTERM to pid, then SIGKILL after grace, and waits until it is gone.
func stop(pid int, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil || isZombieProc(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil && !isZombieProc(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

func isZombieProc(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && isZombie(stat)
}

// inNamespace lists the processes (but the holder) whose mount namespace is the holder's:
// containerd's shims and anything else the node started.
func inNamespace(holder int) []int {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder))
	if err != nil || hostNamespace(ns) {
		// A stale holder PID now used by a process in the host's namespace: its namespace
		// holds every process of the host, none of them ours.
		return nil
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == holder {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && link == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hostNamespace tells whether the mount namespace link is this process's or init's.
func hostNamespace(ns string) bool {
	for _, p := range []string{"/proc/self/ns/mnt", "/proc/1/ns/mnt"} {
		if own, err := os.Readlink(p); err == nil && own == ns {
			return true
		}
	}
	return false
}

// cgroupHierarchies are the mounted cgroup hierarchies (cgroup v1 here, with the named systemd
// hierarchy and a unified one beside them): the kubelet wants its root in each.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			out = append(out, dir)
		}
	}
	return out, nil
}

// makeCgroups creates root in every hierarchy, as the kubelet needs its root beforehand;
// cpuset's cpus and mems are copied from the parent, or no task could join it.
func makeCgroups(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// cgroupProcs lists the processes in root and below, in every hierarchy: the pods'.
func cgroupProcs(root string) []int {
	seen := map[int]bool{}
	hs, _ := cgroupHierarchies()
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	return pids
}

// removeCgroups removes root and everything below it in every hierarchy, deepest first (a
// cgroup is removed with rmdir once it has no task and no child); it says how many it removed.
func removeCgroups(root string) (int, error) {
	hs, err := cgroupHierarchies()
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err == nil {
				removed++
			} else if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// removeLeftCgroups removes the cgroups under root that a cluster killed with its session left
// behind (the host snapshot would otherwise count them as the host's). They hold no process; a
// process in them belongs to a cluster started from another directory, which is not ours to stop.
func removeLeftCgroups(root string, log func(string, ...any)) error {
	if pids := cgroupProcs(root); len(pids) > 0 {
		return fmt.Errorf("cgroup %s holds processes %v of a real cluster started from another directory: stop it there (make real-cluster-down)", root, pids)
	}
	removed, err := removeCgroups(root)
	if removed > 0 {
		log("removed the %d empty cgroups under %s that a stopped cluster left", removed, root)
	}
	return err
}
