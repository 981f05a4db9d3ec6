package framework

// WorkspaceCase is one value of one Workspace field, and whether it is valid. The same table
// is run against the CRD (the API server's schema and CEL rules) and against the gRPC API, so
// the two cannot disagree.
type WorkspaceCase struct {
	// Field is the field's name in the API (workspace.<Field>, as cloudspace.v1 spells it).
	Field string
	// Path is the field's path in the Workspace resource.
	Path  string
	Value string
	Valid bool
}

// WorkspaceCases are the cases: quantities must be positive and under the CRD's ceilings,
// images free of white space and control characters, git URLs https:// only (the clone has no
// SSH key for ssh:// or git@), ports 1024–65535.
var WorkspaceCases = []WorkspaceCase{
	{"cpu", "spec.resources.cpu", "500m", true},
	{"cpu", "spec.resources.cpu", "0", false},
	{"cpu", "spec.resources.cpu", "-1", false},
	{"cpu", "spec.resources.cpu", "100", false},
	{"memory", "spec.resources.memory", "2Gi", true},
	{"memory", "spec.resources.memory", "-2Gi", false},
	{"storage", "spec.storage.size", "1Gi", true},
	{"storage", "spec.storage.size", "0", false},
	{"storage", "spec.storage.size", "-5Gi", false},
	{"storage", "spec.storage.size", "100Ti", false},
	{"image", "spec.image", "codercom/code-server:4.96.4", true},
	{"image", "spec.image", "code server", false},
	{"image", "spec.image", "code\tserver", false},
	{"image", "spec.image", "code\x01server", false},
	{"git_url", "spec.git.url", "https://example.com/a/b.git", true},
	{"git_url", "spec.git.url", "ssh://git@example.com/a/b.git", false},
	{"git_url", "spec.git.url", "git@example.com:a/b.git", false},
	{"git_url", "spec.git.url", "http://example.com/a/b.git", false},
	{"git_url", "spec.git.url", "file:///etc", false},
	{"port", "spec.port", "8080", true},
	{"port", "spec.port", "80", false},
	{"port", "spec.port", "70000", false},
}
