package oci

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// compressionLevel is go-containerregistry's for the layers it compresses (tarball's default),
// so that a layer compressed here has the digest it would have had there.
const compressionLevel = gzip.BestSpeed

// lazyLayer is a layer known by its uncompressed tar: nothing is compressed (what costs) until
// its digest, size or compressed form is asked for, and LayerCache.Cached never asks.
type lazyLayer struct {
	open tarball.Opener
	once sync.Once
	l    v1.Layer
	err  error
}

func (z *lazyLayer) layer() (v1.Layer, error) {
	z.once.Do(func() { z.l, z.err = tarball.LayerFromOpener(z.open, tarball.WithMediaType(types.OCILayer)) })
	return z.l, z.err
}

func (z *lazyLayer) Digest() (v1.Hash, error) { return call(z, v1.Layer.Digest) }
func (z *lazyLayer) DiffID() (v1.Hash, error) { return call(z, v1.Layer.DiffID) }
func (z *lazyLayer) Size() (int64, error)     { return call(z, v1.Layer.Size) }
func (z *lazyLayer) Compressed() (io.ReadCloser, error) {
	return call(z, v1.Layer.Compressed)
}
func (z *lazyLayer) Uncompressed() (io.ReadCloser, error) { return z.open() }
func (z *lazyLayer) MediaType() (types.MediaType, error)  { return types.OCILayer, nil }

func call[T any](z *lazyLayer, f func(v1.Layer) (T, error)) (T, error) {
	l, err := z.layer()
	if err != nil {
		var zero T
		return zero, err
	}
	return f(l)
}

// LayerCache keeps the compressed form of layers in Dir, by the digest of their tar, so that a
// layer is compressed once, not at every build and push (on two cores, compressing every image
// took most of the 25 s `make images` spent pushing to the real cluster, and building without
// a push compressed them all once more). An empty Dir keeps nothing.
type LayerCache struct {
	Dir string
}

// cachedEntry is what the cache records beside a compressed layer.
type cachedEntry struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Cached is l read from the cache, compressed into it first when it is not there. Only the
// layers this package makes are cached; any other is returned as it is.
func (c LayerCache) Cached(l v1.Layer) (v1.Layer, error) {
	z, ok := l.(*lazyLayer)
	if c.Dir == "" || !ok {
		return l, nil
	}
	diffID, err := hashOf(z.open)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(c.Dir, diffID.Hex)
	if cl, err := c.read(base, diffID); err == nil {
		now := time.Now()
		_ = os.Chtimes(base+".json", now, now) // kept by Prune while in use
		return cl, nil
	}
	if err := c.write(base, z.open); err != nil {
		return nil, fmt.Errorf("caching layer %s: %w", diffID, err)
	}
	return c.read(base, diffID)
}

// read is the cached layer at base, if its record and its file agree.
func (c LayerCache) read(base string, diffID v1.Hash) (v1.Layer, error) {
	data, err := os.ReadFile(base + ".json")
	if err != nil {
		return nil, err
	}
	var e cachedEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	digest, err := v1.NewHash(e.Digest)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(base + ".tar.gz"); err != nil || fi.Size() != e.Size {
		return nil, fmt.Errorf("%s.tar.gz is not the %d bytes recorded", base, e.Size)
	}
	return &cachedLayer{path: base + ".tar.gz", digest: digest, diffID: diffID, size: e.Size}, nil
}

// write compresses the tar into base.tar.gz and records its digest and size, each through a
// temporary file renamed into place, the record last: a run stopped midway leaves no record.
func (c LayerCache) write(base string, open tarball.Opener) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.Dir, "tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	sum := sha256.New()
	size, err := compress(io.MultiWriter(tmp, sum), open)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), base+".tar.gz"); err != nil {
		return err
	}
	record, err := json.Marshal(cachedEntry{Digest: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Size: size})
	if err != nil {
		return err
	}
	if err := os.WriteFile(tmp.Name(), record, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), base+".json")
}

// compress writes the gzip of the tar to w, as go-containerregistry compresses a layer, and
// returns how many bytes it wrote.
func compress(w io.Writer, open tarball.Opener) (int64, error) {
	r, err := open()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	counted := &counter{w: w}
	gw, err := gzip.NewWriterLevel(counted, compressionLevel)
	if err != nil {
		return 0, err
	}
	if _, err := io.Copy(gw, r); err != nil {
		return 0, err
	}
	err = gw.Close()
	return counted.n, err
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// hashOf is the digest of what open reads.
func hashOf(open tarball.Opener) (v1.Hash, error) {
	r, err := open()
	if err != nil {
		return v1.Hash{}, err
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return v1.Hash{}, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// Prune removes the layers no build has used for longer than age, and temporary files left by
// a run that was stopped.
func (c LayerCache) Prune(age time.Duration) error {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < age {
			continue
		}
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "tmp-"):
			_ = os.Remove(filepath.Join(c.Dir, name))
		case strings.HasSuffix(name, ".json"):
			base := filepath.Join(c.Dir, strings.TrimSuffix(name, ".json"))
			// The record first: without it the layer is not read, whatever is left.
			if err := os.Remove(base + ".json"); err == nil {
				_ = os.Remove(base + ".tar.gz")
			}
		}
	}
	return nil
}

// cachedLayer is a layer whose compressed form is a file of the cache.
type cachedLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

func (l *cachedLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *cachedLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *cachedLayer) Size() (int64, error)                { return l.size, nil }
func (l *cachedLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *cachedLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

func (l *cachedLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return readCloser{zr, f}, nil
}

// readCloser reads from a gzip reader and closes the file under it.
type readCloser struct {
	*gzip.Reader
	f *os.File
}

func (r readCloser) Close() error {
	return errors.Join(r.Reader.Close(), r.f.Close())
}
