package realcluster

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// HostState is the state of the host the cluster must leave as it found it, one sorted line
// per fact: mounts, network interfaces, addresses and routes, iptables and nftables rules,
// writable kernel settings (but those that change by themselves), network namespaces, cgroups
// at the kubelet's root, loaded kernel modules, and the fixed paths a node would otherwise use.
// Comparing it before make real-cluster and after make real-cluster-down shows what was left.
func HostState() []string {
	var lines []string
	add := func(kind string, items []string) {
		for _, it := range items {
			lines = append(lines, kind+" "+it)
		}
	}
	add("mount", mounts())
	add("ip", command("ip", "-o", "link", "show"))
	add("ip", command("ip", "-o", "addr", "show"))
	add("ip", command("ip", "route", "show", "table", "all"))
	add("iptables", rules(command("iptables-save")))
	add("ip6tables", rules(command("ip6tables-save")))
	add("nft", command("nft", "list", "ruleset"))
	add("netns", command("ip", "netns", "list"))
	add("sysctl", sysctls())
	add("cgroup", cgroupRoots())
	add("module", modules())
	add("path", existing("/run/containerd", "/var/lib/containerd", "/var/lib/kubelet", "/var/lib/cni",
		"/var/log/pods", "/var/log/containers", "/etc/cni/net.d", "/run/netns"))
	sort.Strings(lines)
	return lines
}

func command(name string, args ...string) []string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return []string{fmt.Sprintf("(%s failed: %v)", name, err)}
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return lines
}

var (
	counters   = regexp.MustCompile(`\[\d+:\d+\]`)
	ifCounters = regexp.MustCompile(`^#`)
)

// rules drops iptables-save's comments and packet counters.
func rules(lines []string) []string {
	var out []string
	for _, l := range lines {
		if ifCounters.MatchString(l) {
			continue
		}
		out = append(out, counters.ReplaceAllString(l, ""))
	}
	return out
}

// mounts lists mount points with their type and source (not their IDs, which change).
func mounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 10 {
			continue
		}
		sep := 6
		for sep < len(f) && f[sep] != "-" {
			sep++
		}
		if sep+2 < len(f) {
			out = append(out, f[4]+" "+f[sep+1]+" "+f[sep+2])
		}
	}
	return out
}

// volatileSysctls change by themselves, without anyone setting them.
var volatileSysctls = regexp.MustCompile(`^(kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|fs\.dentry-state|fs\.file-nr|` +
	`fs\.inode-|fs\.aio-nr|fs\.quota\.|net\.netfilter\.nf_conntrack_count|kernel\.sched_domain|vm\.stat_refresh|kernel\.tainted|` +
	`net\.ipv4\.tcp_fastopen_key|kernel\.perf_event_max_sample_rate|fs\.binfmt_misc)`)

// sysctls lists the writable kernel settings under /proc/sys with their values.
func sysctls() []string {
	var out []string
	_ = filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o200 == 0 {
			return nil
		}
		name := strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")
		if volatileSysctls.MatchString(name) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, 4096))
		if err != nil {
			return nil
		}
		out = append(out, name+" = "+strings.Join(strings.Fields(string(data)), " "))
		return nil
	})
	return out
}

// cgroupRoots lists the cgroups at the top of every hierarchy.
func cgroupRoots() []string {
	var out []string
	hs, _ := cgroupHierarchies()
	for _, h := range hs {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, filepath.Join(h, e.Name()))
			}
		}
	}
	return out
}

func modules() []string {
	var out []string
	for _, l := range command("cat", "/proc/modules") {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

func existing(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Status prints the cluster's processes, alive or not.
func (l Layout) Status(w io.Writer) error {
	running := l.running()
	names := l.processNames()
	for _, d := range l.olmDaemons(OLM{}) {
		names = append(names, d.name)
	}
	for _, n := range names {
		state := "not running"
		if pid, ok := running[n]; ok {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Fprintf(w, "%-24s %s\n", n, state)
	}
	return nil
}
