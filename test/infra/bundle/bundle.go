// Package bundle rewrites a copy of the operator's OLM bundle: as another version of the
// operator (the upgrade the OLM suites install), and with every image named by digest (the
// bundle pushed to a registry, as disconnected installs require).
package bundle

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	// Package is the OLM package's name, and the prefix of each CSV's.
	Package = "cloudspace-operator"
	// CSVFile is the CSV's file under manifests/.
	CSVFile = "cloudspace-operator.clusterserviceversion.yaml"
	// AnnotationDisconnected says whether the bundle installs on a cluster that reaches no
	// registry but its mirror: "true" once every image is named by digest.
	AnnotationDisconnected = "features.operators.openshift.io/disconnected"
	// AnnotationContainerImage is the operator's image as catalogs show it.
	AnnotationContainerImage = "containerImage"
	// managerContainer is the operator's container in the CSV's deployment.
	managerContainer = "manager"
)

// CSVName is the CSV name of a version of the package.
func CSVName(version string) string { return Package + ".v" + version }

// Channels are the bundle's channels, as hack/bundle.sh writes them into its metadata (the
// one place they are decided): a catalog lists the package's versions in each, and users
// subscribe to the default one.
type Channels struct {
	Default string
	All     []string
}

// CatalogPackage writes a file-based catalog's package and its channels: each channel lists
// the CSVs named in order, each replacing the one before it (the upgrade graph).
func CatalogPackage(w io.Writer, c Channels, csvs ...string) {
	fmt.Fprintf(w, "---\nschema: olm.package\nname: %s\ndefaultChannel: %s\n", Package, c.Default)
	for _, ch := range c.All {
		fmt.Fprintf(w, "---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n", Package, ch)
		for i, csv := range csvs {
			fmt.Fprintf(w, "- name: %s\n", csv)
			if i > 0 {
				fmt.Fprintf(w, "  replaces: %s\n", csvs[i-1])
			}
		}
	}
}

// ReadChannels reads the channels of the bundle in dir from its metadata/annotations.yaml.
func ReadChannels(dir string) (Channels, error) {
	path := filepath.Join(dir, "metadata", "annotations.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return Channels{}, err
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Channels{}, fmt.Errorf("reading %s: %w", path, err)
	}
	c := Channels{Default: doc.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]}
	for _, name := range strings.Split(doc.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",") {
		if name = strings.TrimSpace(name); name != "" {
			c.All = append(c.All, name)
		}
	}
	if c.Default == "" || !slices.Contains(c.All, c.Default) {
		return Channels{}, fmt.Errorf("%s: default channel %q is not one of %q", path, c.Default, c.All)
	}
	return c, nil
}

// Images are the images a bundle names, as references by digest; an empty one is left as the
// bundle has it.
type Images struct {
	// Operator is the manager's image.
	Operator string
	// WorkspaceIDE, VMLauncher and VMContainerDisk are the RELATED_IMAGE_* the operator runs.
	WorkspaceIDE, VMLauncher, VMContainerDisk string
	// StockScorecard and Scorecard are scorecard's stock test image and the operator's own.
	StockScorecard, Scorecard string
}

// Edit is what Rewrite changes.
type Edit struct {
	// Version is the operator version the bundle is written as; empty keeps the bundle's.
	Version string
	// Replaces is the CSV this version replaces in its channel.
	Replaces string
	Images   Images
}

// Rewrite applies e to the bundle in dir (a copy: it is changed in place). The CSV is edited
// as a document, so that nothing but what e changes differs; a bundle left as it is (no version
// change, no image) is not written at all.
func Rewrite(dir string, e Edit) error {
	path := filepath.Join(dir, "manifests", CSVFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var csv map[string]any
	if err := yaml.Unmarshal(data, &csv); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	from, _, _ := unstructured.NestedString(csv, "spec", "version")
	changed := false
	if e.Version != "" && e.Version != from {
		if err := setVersion(csv, from, e.Version, e.Replaces); err != nil {
			return err
		}
		changed = true
	}
	if e.Images.Operator != "" {
		if err := pin(csv, e.Images); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		if err := writeYAML(path, csv); err != nil {
			return err
		}
	}
	return pinScorecard(filepath.Join(dir, "tests", "scorecard", "config.yaml"), e.Images)
}

// ReadCSV reads the CSV at path.
func ReadCSV(path string) (*operatorsv1alpha1.ClusterServiceVersion, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(data, csv); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return csv, nil
}

// setVersion makes the CSV that of version, replacing replaces, with the operator image's tag
// of that version, as `make bundle` with that VERSION would.
func setVersion(csv map[string]any, from, version, replaces string) error {
	if _, err := semver.Parse(version); err != nil {
		return fmt.Errorf("version %q: %w", version, err)
	}
	if err := unstructured.SetNestedField(csv, CSVName(version), "metadata", "name"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(csv, version, "spec", "version"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(csv, replaces, "spec", "replaces"); err != nil {
		return err
	}
	return forEachContainer(csv, func(c map[string]any) {
		if image, ok := c["image"].(string); ok {
			c["image"] = strings.Replace(image, ":v"+from, ":v"+version, 1)
		}
	})
}

// pin names the operator's image and the images it runs by digest, in its deployment and in
// relatedImages (which lists every image, the operator's too, for mirroring).
func pin(csv map[string]any, imgs Images) error {
	related := map[string]string{
		"RELATED_IMAGE_WORKSPACE_IDE":    imgs.WorkspaceIDE,
		"RELATED_IMAGE_VM_LAUNCHER":      imgs.VMLauncher,
		"RELATED_IMAGE_VM_CONTAINERDISK": imgs.VMContainerDisk,
	}
	// pinned maps each image the bundle named to its reference by digest.
	pinned := map[string]string{}
	err := forEachContainer(csv, func(c map[string]any) {
		if c["name"] != managerContainer {
			return
		}
		c["image"] = imgs.Operator
		env, _ := c["env"].([]any)
		for _, e := range env {
			v := e.(map[string]any)
			if ref, ok := related[fmt.Sprint(v["name"])]; ok && ref != "" {
				pinned[fmt.Sprint(v["value"])] = ref
				v["value"] = ref
			}
		}
	})
	if err != nil {
		return err
	}
	if len(pinned) != len(related) {
		return fmt.Errorf("the CSV's manager container sets %d of the %d RELATED_IMAGE_* variables", len(pinned), len(related))
	}
	if err := pinExamples(csv, pinned); err != nil {
		return err
	}
	relatedImages := []any{
		map[string]any{"name": "operator", "image": imgs.Operator},
		map[string]any{"name": "workspace-ide", "image": imgs.WorkspaceIDE},
		map[string]any{"name": "vm-launcher", "image": imgs.VMLauncher},
		map[string]any{"name": "vm-containerdisk", "image": imgs.VMContainerDisk},
	}
	if err := unstructured.SetNestedSlice(csv, relatedImages, "spec", "relatedImages"); err != nil {
		return err
	}
	// Every image by digest, the bundle installs where its images are mirrored with no way out
	// (OpenShift's "disconnected"); catalogs show the operator's image with a registry path.
	annotations := map[string]string{AnnotationDisconnected: "true", AnnotationContainerImage: imgs.Operator}
	for key, value := range annotations {
		if err := unstructured.SetNestedField(csv, value, "metadata", "annotations", key); err != nil {
			return err
		}
	}
	return nil
}

// pinExamples names by digest, in the alm-examples, every image the bundle pins: an example
// the console offers on a disconnected cluster must run there (the workspace image pre-puller
// names the IDE image).
func pinExamples(csv map[string]any, pinned map[string]string) error {
	annotations, _ := field(csv, "metadata", "annotations").(map[string]any)
	raw, ok := annotations["alm-examples"].(string)
	if !ok {
		return nil
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(raw), &examples); err != nil {
		return fmt.Errorf("reading the alm-examples: %w", err)
	}
	for _, ex := range examples {
		spec, _ := ex["spec"].(map[string]any)
		if ref, ok := pinned[fmt.Sprint(spec["image"])]; ok {
			spec["image"] = ref
		}
	}
	out, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return err
	}
	annotations["alm-examples"] = string(out)
	return nil
}

// forEachContainer calls f on every container of the CSV's deployments, in place (the
// unstructured package's getters return copies).
func forEachContainer(csv map[string]any, f func(map[string]any)) error {
	deployments, ok := field(csv, "spec", "install", "spec", "deployments").([]any)
	if !ok {
		return fmt.Errorf("the CSV has no spec.install.spec.deployments")
	}
	for _, d := range deployments {
		containers, _ := field(d, "spec", "template", "spec", "containers").([]any)
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				f(m)
			}
		}
	}
	return nil
}

// field is the value at path in a decoded document, itself rather than a copy; nil if absent.
func field(doc any, path ...string) any {
	for _, p := range path {
		m, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = m[p]
	}
	return doc
}

// pinScorecard names scorecard's test images by digest in its configuration: the stock tests'
// image (scorecard-test:...) and the operator's own (cloudspace-scorecard-tests:...).
func pinScorecard(path string, imgs Images) error {
	if imgs.StockScorecard == "" && imgs.Scorecard == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	stages, _ := cfg["stages"].([]any)
	for _, s := range stages {
		tests, _ := s.(map[string]any)["tests"].([]any)
		for _, t := range tests {
			test := t.(map[string]any)
			image, _ := test["image"].(string)
			switch {
			case strings.HasPrefix(image, "scorecard-test:") && imgs.StockScorecard != "":
				test["image"] = imgs.StockScorecard
			case strings.HasPrefix(image, "cloudspace-scorecard-tests:") && imgs.Scorecard != "":
				test["image"] = imgs.Scorecard
			}
		}
	}
	return writeYAML(path, cfg)
}

func writeYAML(path string, v any) error {
	out, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
