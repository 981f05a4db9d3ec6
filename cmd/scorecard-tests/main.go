// Command scorecard-tests runs the operator's own scorecard tests it is given (internal/scorecard)
// and prints their results as scorecard's v1alpha3 TestStatus JSON, one result per test, as
// scorecard's stock scorecard-test binary does. Tests named together share each example's
// create, Ready and delete. In a scorecard test pod it reads the bundle from /bundle and runs
// in SCORECARD_NAMESPACE with the pod's service account; as a local process it takes the bundle
// directory, the namespace and the cluster (KUBECONFIG) from flags and the environment.
//
//	scorecard-tests [-bundle DIR] [-namespace NS] [-timeout D] TEST...
//	scorecard-tests -list
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	apimanifests "github.com/operator-framework/api/pkg/manifests"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cloudspace-dev/cloudspace-operator/internal/scorecard"
)

func main() {
	bundleDir := flag.String("bundle", "/bundle", "the bundle directory (scorecard mounts it at /bundle)")
	namespace := flag.String("namespace", os.Getenv("SCORECARD_NAMESPACE"), "where to create the alm-examples (default $SCORECARD_NAMESPACE)")
	// A VM in software emulation is Ready once its guest has booted and cloud-init has finished:
	// 2 to 5 minutes on a busy 2-core node.
	timeout := flag.Duration("timeout", 10*time.Minute, "how long each example may take to become Ready, and to be deleted")
	list := flag.Bool("list", false, "list the tests and exit")
	flag.Parse()
	if *list {
		for _, t := range scorecard.Tests {
			fmt.Printf("%-32s %s\n", t.Name, t.Description)
		}
		return
	}
	if err := run(*bundleDir, *namespace, *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "scorecard-tests:", err)
		os.Exit(1)
	}
}

func run(bundleDir, namespace string, timeout time.Duration, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("name a test or more (-list lists them)")
	}
	tests := make([]scorecard.Test, 0, len(args))
	for _, name := range args {
		test, ok := scorecard.Find(name)
		if !ok {
			return fmt.Errorf("no test %q (-list lists them)", name)
		}
		tests = append(tests, test)
	}
	if namespace == "" {
		return fmt.Errorf("no namespace: set -namespace or SCORECARD_NAMESPACE")
	}
	bundle, err := apimanifests.GetBundleFromDir(bundleDir)
	if err != nil {
		return fmt.Errorf("reading the bundle in %s: %w", bundleDir, err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	env := &scorecard.Env{Client: c, CSV: bundle.CSV, Namespace: namespace, Timeout: timeout}
	out, err := json.MarshalIndent(scorecard.Run(context.Background(), env, tests...), "", "    ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}
