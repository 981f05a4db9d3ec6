package controllers

import (
	"flag"
	"maps"
	"testing"
	"time"
)

// parsed is DefaultConfig with the flags args set.
func parsed(t *testing.T, args ...string) Config {
	t.Helper()
	c := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBindFlags(t *testing.T) {
	t.Setenv("RELATED_IMAGE_VM_LAUNCHER", "mirror.example.com/vm-launcher:0.1.0")
	t.Setenv("RELATED_IMAGE_WORKSPACE_IDE", "")
	c := parsed(t, "--workspace-max-cpu=4", "--workspace-ingress-annotation=a.example.com/b=c",
		"--vm-max-memory=8Gi", "--egress-dns-port=5353", "--workspace-ingress-host-recheck=1m")
	if c.Workspace.Limits.CPU.String() != "4" || !maps.Equal(c.Workspace.IngressAnnotations, map[string]string{"a.example.com/b": "c"}) ||
		c.VM.MaxMemory.String() != "8Gi" || len(c.Egress.DNSPorts) != 1 || c.Egress.DNSPorts[0] != 5353 ||
		c.WorkspaceIngress.Recheck != time.Minute {
		t.Errorf("config from the flags = %+v", c)
	}
	defaults := DefaultConfig()
	if c.VM.LauncherImage != "mirror.example.com/vm-launcher:0.1.0" || c.VM.DefaultImage != defaults.VM.DefaultImage || c.Workspace.IDEImage != "" {
		t.Errorf("images = %q, %q, %q; want the launcher from the environment and the rest the defaults",
			c.VM.LauncherImage, c.VM.DefaultImage, c.Workspace.IDEImage)
	}
	if !c.Workspace.Limits.Memory.Equal(defaults.Workspace.Limits.Memory) || c.Egress.DNSNamespace != "kube-system" {
		t.Errorf("unset flags changed their defaults: %+v", c)
	}
	for _, bad := range []string{"--workspace-max-cpu=0", "--workspace-ingress-annotation=bad key=v", "--workspace-ingress-controller-namespace=Not_A_Name"} {
		if err := parseFlags(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// parseFlags is the error of parsing args with the kinds' flags, quietly.
func parseFlags(args ...string) error {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(discard{})
	c := DefaultConfig()
	c.BindFlags(fs)
	return fs.Parse(args)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
