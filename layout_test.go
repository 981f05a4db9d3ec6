package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestInternalHoldsOnlyWhatShips: internal/ is the operator and nothing else. Every package
// under it is built into a binary we ship (the manager, kubectl-cloudspace, scorecard-tests);
// what builds images, bundles and clusters for the tests and hack/ lives in the test module
// (test/infra) or under hack/, so its dependencies stay out of the operator's go.mod.
func TestInternalHoldsOnlyWhatShips(t *testing.T) {
	shipped := map[string]bool{}
	for _, p := range goList(t, "-deps", ".", "./cmd/...") {
		shipped[p] = true
	}
	for _, p := range goList(t, "./internal/...") {
		if !shipped[p] {
			t.Errorf("%s is under internal/ but no binary we ship imports it: move it to test/infra or hack/", p)
		}
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestLayoutTableNamesTheTree: the Layout section of docs/operations.md names only paths that
// exist, and names every package, program and script a newcomer meets: each entry of cmd/,
// internal/, hack/ (but the tool modules' insides), images/, test/, test/infra/ and test/cmd/;
// its file table of internal/engine/ names every file of the engine.
func TestLayoutTableNamesTheTree(t *testing.T) {
	tables := layoutTables(t)
	named := map[string]bool{}
	for _, p := range tables[0] {
		named[strings.TrimSuffix(p, "/")] = true
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the layout table names %s: %v", p, err)
		}
	}
	for _, dir := range []string{"cmd", "internal", "hack", "images", "test", "test/infra", "test/cmd"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			// test/infra and test/cmd need no row: each of their entries has one.
			p := filepath.Join(dir, e.Name())
			if !named[p] && p != "test/infra" && p != "test/cmd" {
				t.Errorf("%s is not in the layout table of docs/operations.md", p)
			}
		}
	}
	engineFiles, err := filepath.Glob("internal/engine/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range engineFiles {
		if !strings.HasSuffix(f, "_test.go") {
			want = append(want, filepath.Base(f))
		}
	}
	got := slices.Sorted(slices.Values(tables[1]))
	if !slices.Equal(got, want) {
		t.Errorf("the engine's file table names %v; internal/engine holds %v", got, want)
	}
}

// layoutTables returns the paths in the first column of each table of the Layout section.
func layoutTables(t *testing.T) [][]string {
	t.Helper()
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/operations.md has no Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var tables [][]string
	inTable := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			inTable = inTable && strings.HasPrefix(line, "|")
			continue
		}
		if !inTable {
			tables = append(tables, nil)
			inTable = true
		}
		first := strings.Split(line, "|")[1]
		for _, m := range code.FindAllStringSubmatch(first, -1) {
			tables[len(tables)-1] = append(tables[len(tables)-1], m[1])
		}
	}
	if len(tables) != 2 {
		t.Fatalf("the Layout section has %d tables; want the tree's and the engine's", len(tables))
	}
	return tables
}

// TestMakeTargetsAreDocumented: every target make help lists is in the Make targets table of
// docs/operations.md.
func TestMakeTargetsAreDocumented(t *testing.T) {
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Make targets\n")
	if !ok {
		t.Fatal("docs/operations.md has no Make targets section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	targets := regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):.*##`).FindAllStringSubmatch(string(makefile), -1)
	if len(targets) < 10 {
		t.Fatalf("found %d targets in the Makefile", len(targets))
	}
	for _, m := range targets {
		if !strings.Contains(table, "`"+m[1]+"`") {
			t.Errorf("make %s is not in the Make targets table of docs/operations.md", m[1])
		}
	}
}
