package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
