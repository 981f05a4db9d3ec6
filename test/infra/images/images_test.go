package images

import (
	"archive/tar"
	"encoding/binary"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cloudspace-dev/cloudspace-operator/test/framework"
	"github.com/cloudspace-dev/cloudspace-operator/test/infra/oci"
)

// TestImagesAgreeWithTheirDockerfiles checks each product image's configuration against the
// Dockerfile Docker users build it from: what the final stage states (entrypoint, command,
// user, working directory, environment, ports, labels) must be what make images builds. A
// stage FROM scratch states everything; on a base image, what it does not state is the base's
// (but its labels: every label the image has must be stated).
func TestImagesAgreeWithTheirDockerfiles(t *testing.T) {
	root := framework.RepoRoot()
	checked := 0
	for _, r := range All("0.1.0") {
		if r.Set != Product {
			continue
		}
		t.Run(r.Name(), func(t *testing.T) {
			if r.Dockerfile == "" {
				t.Fatal("a product image without a Dockerfile")
			}
			want, err := oci.ParseDockerfileFile(filepath.Join(root, r.Dockerfile), r.DockerfileArgs)
			if err != nil {
				t.Fatal(err)
			}
			got := r.Config
			if r.Dockerfile == "bundle.Dockerfile" {
				if got, err = bundleConfig(root); err != nil {
					t.Fatal(err)
				}
			}
			if !fromScratch(t, filepath.Join(root, r.Dockerfile)) {
				got = stated(got, want)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s and the image make images builds differ (-Dockerfile +image):\n%s", r.Dockerfile, diff)
			}
			checked++
		})
	}
	if checked < 9 {
		t.Errorf("checked %d product images, want every one of them", checked)
	}
}

// stated keeps of got what want states (on a base image, the rest is the base's).
func stated(got, want oci.Config) oci.Config {
	out := oci.Config{Labels: got.Labels}
	if len(want.Entrypoint) > 0 {
		out.Entrypoint, out.Cmd = got.Entrypoint, got.Cmd
	}
	if want.User != "" {
		out.User = got.User
	}
	if want.WorkingDir != "" {
		out.WorkingDir = got.WorkingDir
	}
	if len(want.ExposedPorts) > 0 {
		out.ExposedPorts = got.ExposedPorts
	}
	if len(want.Env) > 0 {
		out.Env = got.Env
	}
	return out
}

// fromScratch tells whether a Dockerfile's final stage starts FROM scratch.
func fromScratch(t *testing.T, path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.EqualFold(f[0], "FROM") {
			last = f[1]
		}
	}
	return last == "scratch"
}

// The stand-ins for upstream images and every image the bundle needs are built before what
// names them.
func TestRecipesComeAfterWhatTheyName(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range All("0.1.0") {
		if r.Repo == BundleRepo {
			for _, need := range []string{OperatorRepo + ":" + r.Tag, IDERepo + ":" + ideTag, LauncherRepo + ":" + launcherTag,
				DiskRepo + ":" + diskTag, StockScorecardRepo + ":" + stockScorecardTag, ScorecardTestsRepo + ":v0.1.0"} {
				if !seen[need] {
					t.Errorf("%s is built before %s, which it names", r.Name(), need)
				}
			}
		}
		if r.Repo == CatalogRepo && !seen[BundleRepo+":v"+UpgradeVersion] {
			t.Errorf("%s is built before the bundles it holds", r.Name())
		}
		seen[r.Name()] = true
	}
}

// TestOperatorImageHasCertificationLabels: the operator's image carries every label OpenShift's
// certification (preflight's HasRequiredLabel) asks of an operator image.
func TestOperatorImageHasCertificationLabels(t *testing.T) {
	labels := operator("0.1.0").Config.Labels
	for _, name := range []string{"name", "vendor", "version", "release", "summary", "description", "maintainer"} {
		if labels[name] == "" {
			t.Errorf("the operator image has no %s label", name)
		}
	}
}

// TestOperatorLicensesNameEveryLinkedModule: the operator image's /licenses holds the project's
// licence, Go's, and a licence file for each module the manager links.
func TestOperatorLicensesNameEveryLinkedModule(t *testing.T) {
	root := framework.RepoRoot()
	dir, err := (&Builder{Repo: root, Work: t.TempDir()}).licenses(".", "manager")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "LICENSE")); err != nil || string(got) != string(ours) {
		t.Errorf("/licenses/LICENSE is not the project's: %v", err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]bool{"golang.org/go": true}
	for _, m := range strings.Fields(string(out)) {
		modules[m] = m != "github.com/cloudspace-dev/cloudspace-operator"
	}
	for m, linked := range modules {
		if files, _ := os.ReadDir(filepath.Join(dir, m)); linked && len(files) == 0 {
			t.Errorf("no licence of %s, which the manager links", m)
		}
	}
	if len(modules) < 50 {
		t.Errorf("the manager links %d modules? go list said %q", len(modules), out)
	}
}

// TestGoImagesListBothPlatforms: every product image (the operator, OLM's catalog and
// bundle, the operator's children's, the test images) is an index of a linux/amd64 and a
// linux/arm64 image, as the CSV's labels say (OperatorHub's multiarch validator holds every
// image the CSV names to them); the real cluster's infrastructure stays the host's. A Go
// image's arm64 binary is built for arm64, and a second build gives the same index.
func TestGoImagesListBothPlatforms(t *testing.T) {
	for _, r := range All("0.1.0") {
		if got := slices.Equal(r.arches(), multiArch); got != (r.Set == Product) {
			t.Errorf("%s (%s) is built for %v", r.Name(), r.Set, r.arches())
		}
	}
	root := framework.RepoRoot()
	build := func() (string, map[string]uint16) {
		b := &Builder{Repo: root, Bin: filepath.Join(root, "bin"), Work: t.TempDir(), Log: t.Logf}
		img, _, err := b.assemble(testDaemon("v0"))
		if err != nil {
			t.Fatal(err)
		}
		idx, ok := img.(v1.ImageIndex)
		if !ok {
			t.Fatalf("the test daemon's image is a %T, not an index", img)
		}
		digest, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return digest.String(), elfMachines(t, idx, "test-daemon")
	}
	first, machines := build()
	// ELF e_machine: 62 is x86-64, 183 AArch64.
	if want := map[string]uint16{"amd64": 62, "arm64": 183}; !maps.Equal(machines, want) {
		t.Errorf("the binary's ELF machine by platform: %v, want %v", machines, want)
	}
	if second, _ := build(); second != first {
		t.Errorf("two builds of the test daemon's index: %s and %s", first, second)
	}
}

// elfMachines reads, for each image of idx, the ELF machine of its file named name.
func elfMachines(t *testing.T, idx v1.ImageIndex, name string) map[string]uint16 {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint16{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc := mutate.Extract(img)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				t.Fatalf("%s: no %s in the image (%v)", d.Platform.Architecture, name, err)
			}
			if path.Base(h.Name) == name {
				head := make([]byte, 20)
				if _, err := io.ReadFull(tr, head); err != nil || string(head[:4]) != "\x7fELF" {
					t.Fatalf("%s: %s is not an ELF binary (%v)", d.Platform.Architecture, name, err)
				}
				out[d.Platform.Architecture] = binary.LittleEndian.Uint16(head[18:])
				break
			}
		}
		rc.Close()
	}
	return out
}

// TestTheCSVNamesThePlatformsBuilt: the bundle's CSV says the operator supports exactly the
// platforms the product's images are built for (operatorframework.io/arch.* and os.* labels),
// and its manager's node affinity admits exactly those nodes.
func TestTheCSVNamesThePlatformsBuilt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "bundle", "manifests", "cloudspace-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var csv struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Install struct {
				Spec struct {
					Deployments []struct {
						Spec appsv1.DeploymentSpec `json:"spec"`
					} `json:"deployments"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatal(err)
	}
	var labelled []string
	for k, v := range csv.Metadata.Labels {
		if arch, ok := strings.CutPrefix(k, "operatorframework.io/arch."); ok && v == "supported" {
			labelled = append(labelled, arch)
		}
	}
	slices.Sort(labelled)
	if !slices.Equal(labelled, multiArch) || csv.Metadata.Labels["operatorframework.io/os.linux"] != "supported" {
		t.Errorf("the CSV's platform labels: arch %v, os.linux %q; want arch %v, os.linux supported", labelled, csv.Metadata.Labels["operatorframework.io/os.linux"], multiArch)
	}
	if len(csv.Spec.Install.Spec.Deployments) != 1 {
		t.Fatalf("%d deployments in the CSV, want 1", len(csv.Spec.Install.Spec.Deployments))
	}
	want := []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: multiArch},
		{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
	}
	aff := csv.Spec.Install.Spec.Deployments[0].Spec.Template.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 ||
		!cmp.Equal(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, want) {
		t.Errorf("the manager's node affinity: %+v; want one term: %+v", aff, want)
	}
}
