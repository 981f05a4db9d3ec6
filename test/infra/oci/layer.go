// Package oci builds container images without a container engine: layers are written as
// deterministic tar streams (sorted entries, fixed owners and times) and assembled into OCI
// images with go-containerregistry, so the same inputs always give the same digests.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Epoch is the time stamped on every file, layer and image (the SOURCE_DATE_EPOCH of the
// recipes that build root filesystems from Debian's packages): 2025-01-01T00:00:00Z.
var Epoch = time.Unix(1735689600, 0).UTC()

// Entry is one file, directory or symbolic link of a layer.
type Entry struct {
	// Path is where it is in the image, absolute ("/manager").
	Path string
	// Mode holds the permission bits and, for a directory or a link, its type.
	Mode     fs.FileMode
	UID, GID int
	// Source is the file on disk whose content a regular file has; Data is used when it is empty.
	Source string
	Data   []byte
	// Link is a symbolic link's target.
	Link string
}

// File is a regular file copied from src.
func File(p, src string, mode fs.FileMode) Entry { return Entry{Path: p, Source: src, Mode: mode} }

// Bytes is a regular file with the given content.
func Bytes(p string, data []byte, mode fs.FileMode) Entry {
	return Entry{Path: p, Data: data, Mode: mode}
}

// Dir is a directory owned by uid:gid.
func Dir(p string, mode fs.FileMode, uid, gid int) Entry {
	return Entry{Path: p, Mode: fs.ModeDir | mode, UID: uid, GID: gid}
}

// Symlink is a symbolic link to target.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target}
}

// Tree is every directory and regular file under src, placed under dst and owned by root:
// files keep their executable bits (0755 or 0644), directories are 0755.
func Tree(dst, src string) ([]Entry, error) {
	var entries []Entry
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			entries = append(entries, Dir(target, 0o755, 0, 0))
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			entries = append(entries, File(target, p, mode))
		default:
			return fmt.Errorf("%s: only directories and regular files are copied", p)
		}
		return nil
	})
	return entries, err
}

// Layer is a layer holding entries, written as an uncompressed tar sorted by path, every
// missing parent directory added (0755, root), every time set to Epoch. It is compressed when
// first needed (or taken from a LayerCache).
func Layer(entries []Entry) (v1.Layer, error) {
	data, err := Tar(entries)
	if err != nil {
		return nil, err
	}
	return &lazyLayer{open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}, nil
}

// LayerFromTar is a layer whose content is the tar file at p (a root filesystem built by a
// recipe that makes its own tar reproducible).
func LayerFromTar(p string) (v1.Layer, error) {
	if _, err := os.Stat(p); err != nil {
		return nil, err
	}
	return &lazyLayer{open: func() (io.ReadCloser, error) { return os.Open(p) }}, nil
}

// Tar writes entries as a deterministic tar stream.
func Tar(entries []Entry) ([]byte, error) {
	all, err := withParents(entries)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		if err := writeEntry(tw, e); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withParents sorts entries by path, adds the directories they need and refuses a path given
// twice.
func withParents(entries []Entry) ([]Entry, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		p := path.Clean("/" + e.Path)
		if p == "/" {
			continue
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("%s is given twice", p)
		}
		e.Path = p
		byPath[p] = e
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = Dir(dir, 0o755, 0, 0)
			}
		}
	}
	all := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		all = append(all, e)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Path < all[j].Path })
	return all, nil
}

func writeEntry(tw *tar.Writer, e Entry) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    int64(e.Mode.Perm()),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: Epoch,
		Format:  tar.FormatPAX,
	}
	switch {
	case e.Mode.IsDir():
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		return tw.WriteHeader(h)
	case e.Mode&fs.ModeSymlink != 0:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		return tw.WriteHeader(h)
	}
	data := e.Data
	if e.Source != "" {
		var err error
		if data, err = os.ReadFile(e.Source); err != nil {
			return err
		}
	}
	h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
