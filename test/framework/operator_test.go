package framework

import "testing"

// TestProbePortsAvoidTheOperatorsOwnListeners: a restarted operator's probe port is never one
// its own arguments bind (the e2e suite's legacy listener was once picked as the probe port of
// the operator started again, which then failed to bind it).
func TestProbePortsAvoidTheOperatorsOwnListeners(t *testing.T) {
	taken := portsIn([]string{"--grpc-bind-address=127.0.0.1:34000", "--grpc-legacy-bind-address=127.0.0.1:34709", "--leader-elect=false"})
	if !taken[34000] || !taken[34709] || len(taken) != 2 {
		t.Fatalf("ports in the arguments: %v, want 34000 and 34709", taken)
	}
	offers := []int{34709, 34000, 40000}
	free := func() (int, error) {
		p := offers[0]
		offers = offers[1:]
		return p, nil
	}
	if port, err := freePortExcept(taken, free); err != nil || port != 40000 {
		t.Errorf("picked %d (%v), want 40000: the others are the operator's own", port, err)
	}
}
