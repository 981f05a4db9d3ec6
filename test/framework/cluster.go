// Package framework starts the real parts that integration tests, end-to-end tests and the
// benchmark run against: the embedded KWOK cluster and the operator binary.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RepoRoot is the repository's top directory: found from this file's location, or, when the
// build kept no location (-trimpath, as make builds), from the working directory up to the
// directory that holds PROJECT.
func RepoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("finding the repository's top directory: %v", err))
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			return dir
		}
		if dir == filepath.Dir(dir) {
			panic(fmt.Sprintf("finding the repository's top directory: no PROJECT file in %s or above", wd))
		}
	}
}

// Cluster is a private embedded cluster started by hack/dev-cluster.sh.
type Cluster struct {
	Name       string
	Dir        string
	Kubeconfig string
	Config     *rest.Config
}

// StartCluster starts a KWOK cluster whose state lives under dir. Its output goes to dir/up.log.
func StartCluster(ctx context.Context, dir, name string) (*Cluster, error) {
	c := &Cluster{Name: name, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if err := c.script(ctx, "up"); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig of cluster %s: %w", name, err)
	}
	Unthrottled(cfg)
	c.Config = cfg
	return c, nil
}

// PIDs are the cluster's processes by name: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok-controller, as kwokctl recorded them.
func (c *Cluster) PIDs() (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(c.Dir, "kwok", "clusters", c.Name, "pids", "*.pid"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("finding the processes of cluster %s: %d pid files, %v", c.Name, len(files), err)
	}
	pids := make(map[string]int, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return pids, nil
}

// Stop removes the cluster and its processes.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.script(ctx, "down")
}

// StopControlPlane stops every component of the cluster (etcd, kube-apiserver and the
// controllers), keeping its state; StartControlPlane starts them again.
func (c *Cluster) StopControlPlane(ctx context.Context) error { return c.script(ctx, "stop") }

// StartControlPlane starts a stopped cluster again and waits until its API server is ready.
func (c *Cluster) StartControlPlane(ctx context.Context) error { return c.script(ctx, "start") }

func (c *Cluster) script(ctx context.Context, verb string) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(filepath.Dir(c.Dir), c.Name+"-"+verb+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "hack", "dev-cluster.sh"), verb)
	cmd.Env = append(os.Environ(), "DEV_CLUSTER_DIR="+c.Dir, "DEV_CLUSTER_NAME="+c.Name)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("dev-cluster.sh %s: %w\n%s", verb, err, out)
	}
	return nil
}

// Unthrottled lifts client-go's default rate limit (5 requests a second, bursts of 10) from a
// test's client: a suite's waits poll at once, every PollInterval, and the default queued each
// behind the others until a wait ran out of time without having looked.
func Unthrottled(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = 200, 400
}
