package oci

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestLayerCacheKeepsDigestsAndCompressesOnce: a cached layer has the digest, diff ID, size
// and bytes go-containerregistry gives the same tar; the second build of it reads the cache
// (its tar is read once, to find it, and nothing is written); a layer unused for longer than
// Prune's age goes, one in use stays.
func TestLayerCacheKeepsDigestsAndCompressesOnce(t *testing.T) {
	noise := make([]byte, 300<<10) // several of gzip's blocks, some of them incompressible
	_, _ = rand.Read(noise[:100<<10])
	data, err := Tar([]Entry{Bytes("/noise", noise, 0o644), Bytes("/etc/motd", []byte("hello\n"), 0o644)})
	if err != nil {
		t.Fatal(err)
	}
	opens := 0
	open := func() (io.ReadCloser, error) { opens++; return io.NopCloser(bytes.NewReader(data)), nil }
	want, err := tarball.LayerFromOpener(open, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	cache := LayerCache{Dir: t.TempDir()}

	opens = 0
	first, err := cache.Cached(&lazyLayer{open: open})
	if err != nil {
		t.Fatal(err)
	}
	if opens != 2 {
		t.Errorf("a layer new to the cache: its tar read %d times, want 2 (its digest, its compression)", opens)
	}
	sameLayer(t, first, want)
	entries, _ := os.ReadDir(cache.Dir)
	if len(entries) != 2 {
		t.Fatalf("the cache holds %d files, want the layer and its record", len(entries))
	}
	// By name: the record (.json), then the layer (.tar.gz).
	record, compressed := filepath.Join(cache.Dir, entries[0].Name()), filepath.Join(cache.Dir, entries[1].Name())
	written := modTime(t, compressed)

	opens = 0
	second, err := cache.Cached(&lazyLayer{open: open})
	if err != nil {
		t.Fatal(err)
	}
	if rewritten := modTime(t, compressed) != written; opens != 1 || rewritten {
		t.Errorf("a cached layer: its tar read %d times, want 1; compressed again: %v", opens, rewritten)
	}
	sameLayer(t, second, want)

	if err := cache.Prune(time.Hour); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(cache.Dir); len(left) != 2 {
		t.Errorf("pruned a layer used a moment ago: %d files left, want 2", len(left))
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(record, old, old); err != nil {
		t.Fatal(err)
	}
	if err := cache.Prune(time.Hour); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(cache.Dir); len(left) != 0 {
		t.Errorf("a layer unused for 2 h, pruned at 1 h: %d files left, want none", len(left))
	}
}

// sameLayer fails unless got has want's digest, diff ID, size and compressed bytes, and
// uncompresses to the same tar.
func sameLayer(t *testing.T, got, want v1.Layer) {
	t.Helper()
	for _, f := range []func(v1.Layer) (v1.Hash, error){v1.Layer.Digest, v1.Layer.DiffID} {
		g, err1 := f(got)
		w, err2 := f(want)
		if err1 != nil || err2 != nil || g != w {
			t.Errorf("%v (%v), want %v (%v)", g, err1, w, err2)
		}
	}
	if g, _ := got.Size(); g != mustSize(t, want) {
		t.Errorf("size %d, want %d", g, mustSize(t, want))
	}
	if !bytes.Equal(readAll(t, got.Compressed), readAll(t, want.Compressed)) {
		t.Error("compressed bytes differ from go-containerregistry's")
	}
	if !bytes.Equal(readAll(t, got.Uncompressed), readAll(t, want.Uncompressed)) {
		t.Error("uncompressed tar differs")
	}
}

func mustSize(t *testing.T, l v1.Layer) int64 {
	t.Helper()
	n, err := l.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readAll(t *testing.T, open func() (io.ReadCloser, error)) []byte {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func modTime(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}
