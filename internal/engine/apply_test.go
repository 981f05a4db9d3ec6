package engine

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWavesKeepPrerequisitesFirst: what a pod needs at admission is written before the rest,
// and the rest is one wave, in install order.
func TestWavesKeepPrerequisitesFirst(t *testing.T) {
	stepsOf := func(kinds ...string) []step {
		var out []step
		for _, k := range kinds {
			u := &unstructured.Unstructured{}
			u.SetKind(k)
			out = append(out, step{desired: u})
		}
		return out
	}
	kindsOf := func(ws [][]step) [][]string {
		var out [][]string
		for _, w := range ws {
			var ks []string
			for _, st := range w {
				ks = append(ks, st.desired.GetKind())
			}
			out = append(out, ks)
		}
		return out
	}
	for _, tc := range []struct {
		in   []string
		want [][]string
	}{
		{[]string{"NetworkPolicy", "Secret", "PersistentVolumeClaim", "Service", "Deployment"},
			[][]string{{"NetworkPolicy", "Secret", "PersistentVolumeClaim", "Service", "Deployment"}}},
		{[]string{"ServiceAccount", "DaemonSet"}, [][]string{{"ServiceAccount"}, {"DaemonSet"}}},
		{[]string{"ServiceAccount", "Secret", "Role", "RoleBinding", "Pod"},
			[][]string{{"ServiceAccount", "Role", "RoleBinding"}, {"Secret", "Pod"}}},
		{nil, nil},
	} {
		if got := kindsOf(waves(stepsOf(tc.in...))); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("waves(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
