package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a program the tests run in the background, its output in a log file.
type Process struct {
	LogPath string
	cmd     *exec.Cmd
	done    chan error
}

// StartProcess runs binary with args and env (added to this process's environment), its
// output in logPath.
func StartProcess(binary, logPath string, env []string, args ...string) (*Process, error) {
	return StartProcessIn("", binary, logPath, env, args...)
}

// StartProcessIn is StartProcess in the working directory dir ("": this process's).
func StartProcessIn(dir, binary, logPath string, env []string, args ...string) (*Process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Process{LogPath: logPath, cmd: exec.Command(binary, args...), done: make(chan error, 1)}
	p.cmd.Dir, p.cmd.Env = dir, append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() { p.done <- p.cmd.Wait(); logFile.Close() }()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited returns the process's exit error if it has exited, and whether it has.
func (p *Process) Exited() (error, bool) {
	select {
	case err := <-p.done:
		p.done <- err
		return err, true
	default:
		return nil, false
	}
}

// Kill sends SIGKILL, as a node or the OOM killer would, and waits for the exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	err := <-p.done
	p.done <- err
}

// Stop sends SIGTERM and waits for the exit, killing the process after timeout; it returns
// the process's exit error, if any.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.cmd.Path, timeout)
	}
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// ProcessUsage is a process's CPU time so far and its peak resident memory.
type ProcessUsage struct {
	CPUSeconds float64
	PeakRSSMiB float64
}

// Usage reads a live process's CPU time and peak RSS from /proc.
func Usage(pid int) (ProcessUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcessUsage{}, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcessUsage{}, err
	}
	var hwmKiB float64
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwmKiB, _ = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		}
	}
	return ProcessUsage{CPUSeconds: (utime + stime) / clockTicks, PeakRSSMiB: hwmKiB / 1024}, nil
}

// Parallel runs fn(0..n-1) on workers goroutines and returns the first error; after one, no
// further i is started.
func Parallel(workers, n int, fn func(i int) error) error {
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for i := range n {
			select {
			case jobs <- i:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
