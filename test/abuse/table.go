package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
)

// attack is one hostile act. run returns the answer the attacker got and, when the attacker got
// more than the operator allows, what got through.
type attack struct {
	name string
	run  func(ctx context.Context) (answer, through string, err error)
}

// row is one attack's outcome.
type row struct {
	name, answer, through string
	peakRSSMiB            float64
}

// attacks is every attack, in the order run: those that need workspaces come after the
// creates that make them, and the memory-heavy ones after the cheap ones.
func (a *abuse) attacks() []attack {
	return []attack{
		{"creates over the running quota", a.createsOverQuota},
		{"Watch streams beyond the cap", a.watchStreams},
		{"calls with wrong tokens", a.tokenFlood},
		{"a ServiceAccount impersonating users it may not", a.impersonationFlood},
		{fmt.Sprintf("%d concurrent Start(wait) by one user", a.o.waits), a.waitFlood},
		{fmt.Sprintf("%d RotateAccess calls by one user", a.o.rotations), a.rotationFlood},
		{fmt.Sprintf("%d calls with %d MiB of metadata", a.o.headerCalls, a.o.headerMiB), a.headerFlood},
		{fmt.Sprintf("%d TLS connections, health call only", a.o.conns), a.connectionFlood},
		{fmt.Sprintf("%d Workspaces with 64 env values of 20 KB", a.o.giantSpecs), a.giantSpecs},
		{fmt.Sprintf("%d labelled %d KiB Secrets", a.o.secrets, a.o.secretKiB), a.labelledSecrets},
		{"the same, each naming a Workspace as controller", a.ownedSecrets},
	}
}

// attackAll runs every attack and prints the table; it returns how many got through.
func (a *abuse) attackAll(ctx context.Context) (int, error) {
	if err := waitServing(ctx, a.api("user0"), a.as(ctx, a.tokens["user0"])); err != nil {
		return 0, err
	}
	var rows []row
	for _, at := range a.attacks() {
		r, err := a.measure(ctx, at)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", at.name, err)
		}
		fmt.Printf("abuse: %-44s %7.1f MiB  %s\n", r.name, r.peakRSSMiB, r.answer)
		rows = append(rows, r)
	}
	return printTable(rows, a.o.maxRSSMiB), nil
}

// measure runs one attack with the operator's peak RSS reset before it and read after it.
func (a *abuse) measure(ctx context.Context, at attack) (row, error) {
	if err := resetPeakRSS(a.op.PID()); err != nil {
		return row{}, err
	}
	answer, through, err := at.run(ctx)
	if err != nil {
		return row{}, err
	}
	if err, exited := a.op.Exited(); exited {
		return row{}, fmt.Errorf("the operator died: %v", err)
	}
	usage, err := framework.Usage(a.op.PID())
	if err != nil {
		return row{}, err
	}
	return row{name: at.name, answer: answer, through: through, peakRSSMiB: usage.PeakRSSMiB}, nil
}

// printTable prints the rows and returns how many attacks got through.
func printTable(rows []row, maxRSS float64) int {
	failed := 0
	fmt.Printf("\n| attack | operator peak RSS | answer | verdict |\n|---|---|---|---|\n")
	for _, r := range rows {
		verdict := "held"
		if r.peakRSSMiB > maxRSS {
			r.through = strings.TrimPrefix(r.through+fmt.Sprintf("; peak RSS over %.0f MiB", maxRSS), "; ")
		}
		if r.through != "" {
			verdict, failed = "GOT THROUGH: "+r.through, failed+1
		}
		fmt.Printf("| %s | %.1f MiB | %s | %s |\n", r.name, r.peakRSSMiB, r.answer, verdict)
	}
	fmt.Println()
	return failed
}

// resetPeakRSS resets the process's peak resident set (VmHWM), so that each attack's peak is
// its own (proc(5): clear_refs, value 5).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// raiseFileLimit lifts the open-file limit to its hard limit.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("reading the open-file limit: %w", err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raising the open-file limit: %w", err)
	}
	return nil
}
