package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinnedBundleSaysDisconnected: a bundle whose images are pinned by digest says it installs
// disconnected and names the operator's image with its registry; the repository's, by tag,
// says neither.
func TestPinnedBundleSaysDisconnected(t *testing.T) {
	imgs := Images{Operator: "registry.test/op@sha256:1", WorkspaceIDE: "registry.test/ide@sha256:2",
		VMLauncher: "registry.test/launcher@sha256:3", VMContainerDisk: "registry.test/disk@sha256:4",
		StockScorecard: "registry.test/sc@sha256:5", Scorecard: "registry.test/tests@sha256:6"}
	for _, tc := range []struct {
		name                      string
		images                    Images
		disconnected, containerIn string
	}{
		{"by tag", Images{}, "false", ""},
		{"by digest", imgs, "true", imgs.Operator},
	} {
		dir := filepath.Join(t.TempDir(), "bundle")
		if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "..", "bundle"))); err != nil {
			t.Fatal(err)
		}
		if err := Rewrite(dir, Edit{Images: tc.images}); err != nil {
			t.Fatal(err)
		}
		csv, err := ReadCSV(filepath.Join(dir, "manifests", CSVFile))
		if err != nil {
			t.Fatal(err)
		}
		if got := csv.Annotations[AnnotationDisconnected]; got != tc.disconnected {
			t.Errorf("%s: %s = %q, want %q", tc.name, AnnotationDisconnected, got, tc.disconnected)
		}
		if got := csv.Annotations[AnnotationContainerImage]; got != tc.containerIn {
			t.Errorf("%s: %s = %q, want %q", tc.name, AnnotationContainerImage, got, tc.containerIn)
		}
		for _, r := range csv.Spec.RelatedImages {
			if tc.disconnected == "true" && !strings.Contains(r.Image, "@sha256:") {
				t.Errorf("%s: related image %s is not by digest", tc.name, r.Image)
			}
		}
	}
}
