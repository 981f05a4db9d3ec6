package framework

import (
	"time"

	"github.com/cloudspace-dev/cloudspace-operator/test/infra/devwebhook"
)

// TLSFiles are a test CA and a server certificate it signed for 127.0.0.1 and localhost.
type TLSFiles struct {
	CA, Cert, Key string
}

// NewTLSFiles writes a CA (unless dir has one) and a server certificate it signed into dir.
func NewTLSFiles(dir string) (TLSFiles, error) {
	f, err := devwebhook.Issue(dir, 24*time.Hour)
	return TLSFiles{CA: f.CA, Cert: f.Cert, Key: f.Key}, err
}
