// Package bundle rewrites a copy of the operator's OLM bundle: as another version of the
// operator (the upgrade the OLM suites install), and with every image named by digest (the
// bundle pushed to a registry, as disconnected installs require).
package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	// Package is the OLM package's name, and the prefix of each CSV's.
	Package = "cloudspace-operator"
	// CSVFile is the CSV's file under manifests/.
	CSVFile = "cloudspace-operator.clusterserviceversion.yaml"
	// managerContainer is the operator's container in the CSV's deployment.
	managerContainer = "manager"
)

// CSVName is the CSV name of a version of the package.
func CSVName(version string) string { return Package + ".v" + version }

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

// Rewrite applies e to the bundle in dir (a copy: it is changed in place). A bundle left as it
// is (no version change, no image) is not written at all.
func Rewrite(dir string, e Edit) error {
	path := filepath.Join(dir, "manifests", CSVFile)
	csv, err := ReadCSV(path)
	if err != nil {
		return err
	}
	from := csv.Spec.Version.String()
	changed := false
	if e.Version != "" && e.Version != from {
		setVersion(csv, from, e.Version, e.Replaces)
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
func setVersion(csv *operatorsv1alpha1.ClusterServiceVersion, from, version, replaces string) {
	csv.Name = CSVName(version)
	csv.Spec.Version.Version = semver.MustParse(version)
	csv.Spec.Replaces = replaces
	forEachContainer(csv, func(c *corev1.Container) {
		c.Image = strings.Replace(c.Image, ":v"+from, ":v"+version, 1)
	})
}

// pin names the operator's image and the images it runs by digest, in its deployment and in
// relatedImages (which lists every image, the operator's too, for mirroring).
func pin(csv *operatorsv1alpha1.ClusterServiceVersion, imgs Images) error {
	related := map[string]string{
		"RELATED_IMAGE_WORKSPACE_IDE":    imgs.WorkspaceIDE,
		"RELATED_IMAGE_VM_LAUNCHER":      imgs.VMLauncher,
		"RELATED_IMAGE_VM_CONTAINERDISK": imgs.VMContainerDisk,
	}
	found := 0
	forEachContainer(csv, func(c *corev1.Container) {
		if c.Name != managerContainer {
			return
		}
		c.Image = imgs.Operator
		for i := range c.Env {
			if ref, ok := related[c.Env[i].Name]; ok && ref != "" {
				c.Env[i].Value = ref
				found++
			}
		}
	})
	if found != len(related) {
		return fmt.Errorf("the CSV's manager container sets %d of the %d RELATED_IMAGE_* variables", found, len(related))
	}
	csv.Spec.RelatedImages = []operatorsv1alpha1.RelatedImage{
		{Name: "operator", Image: imgs.Operator},
		{Name: "workspace-ide", Image: imgs.WorkspaceIDE},
		{Name: "vm-launcher", Image: imgs.VMLauncher},
		{Name: "vm-containerdisk", Image: imgs.VMContainerDisk},
	}
	return nil
}

func forEachContainer(csv *operatorsv1alpha1.ClusterServiceVersion, f func(*corev1.Container)) {
	for i := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		pod := &csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[i].Spec.Template.Spec
		for j := range pod.Containers {
			f(&pod.Containers[j])
		}
	}
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
