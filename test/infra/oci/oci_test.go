package oci

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestTarIsDeterministicAndComplete(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		File("/usr/local/bin/tool", bin, 0o755),
		Dir("/var/run/app", 0o750, 107, 107),
		Symlink("/bin/sh", "busybox"),
		Bytes("etc/passwd", []byte("root:x:0:0::/:/bin/sh\n"), 0o644),
	}
	first, err := Tar(entries)
	if err != nil {
		t.Fatal(err)
	}
	// The same entries in another order give the same bytes.
	second, err := Tar([]Entry{entries[3], entries[1], entries[0], entries[2]})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatal("the tar of the same entries differs with their order")
	}
	var got []string
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(Epoch) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, Epoch)
		}
		got = append(got, h.Name+" "+h.FileInfo().Mode().String()+" "+strconv.Itoa(h.Uid)+":"+strconv.Itoa(h.Gid))
	}
	want := []string{
		"bin/ drwxr-xr-x 0:0",
		"bin/sh Lrwxrwxrwx 0:0",
		"etc/ drwxr-xr-x 0:0",
		"etc/passwd -rw-r--r-- 0:0",
		"usr/ drwxr-xr-x 0:0",
		"usr/local/ drwxr-xr-x 0:0",
		"usr/local/bin/ drwxr-xr-x 0:0",
		"usr/local/bin/tool -rwxr-xr-x 0:0",
		"var/ drwxr-xr-x 0:0",
		"var/run/ drwxr-xr-x 0:0",
		"var/run/app/ drwxr-x--- 107:107",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestTarRefusesAPathTwice(t *testing.T) {
	_, err := Tar([]Entry{Bytes("/a", nil, 0o644), Bytes("a", []byte("x"), 0o644)})
	if err == nil || !strings.Contains(err.Error(), "/a is given twice") {
		t.Fatalf("got %v, want an error naming /a", err)
	}
}

func TestImageDigestIsReproducibleAndConfigReadsBack(t *testing.T) {
	cfg := Config{
		Entrypoint:   []string{"/manager"},
		User:         "65532:65532",
		WorkingDir:   "/opt/cloudspace",
		Env:          []string{"PATH=/usr/local/bin"},
		ExposedPorts: []string{"8080/tcp"},
		Labels:       map[string]string{"a": "b"},
	}
	digest := func() string {
		layer, err := Layer([]Entry{Bytes("/manager", []byte("binary"), 0o755)})
		if err != nil {
			t.Fatal(err)
		}
		img, err := ImageFor(Amd64, cfg, layer)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ConfigOf(img)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(cfg, back); diff != "" {
			t.Errorf("config read back (-set +read):\n%s", diff)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatalf("two builds of the same image: %s and %s", a, b)
	}
}

// TestIndexListsEachPlatform: an index lists one image per architecture with its platform,
// the image a runtime on that architecture picks, and two builds give the same digest.
func TestIndexListsEachPlatform(t *testing.T) {
	index := func() (string, []string) {
		var imgs []v1.Image
		for _, arch := range []string{Amd64, "arm64"} {
			layer, err := Layer([]Entry{Bytes("/daemon", []byte("binary for "+arch), 0o755)})
			if err != nil {
				t.Fatal(err)
			}
			img, err := ImageFor(arch, Config{Entrypoint: []string{"/daemon"}}, layer)
			if err != nil {
				t.Fatal(err)
			}
			imgs = append(imgs, img)
		}
		idx, err := Index(imgs...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		var platforms []string
		for _, d := range m.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			file, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if d.Platform == nil || d.Platform.Architecture != file.Architecture || d.Platform.OS != "linux" {
				t.Errorf("manifest %s listed as %v, its config says %s/%s", d.Digest, d.Platform, file.OS, file.Architecture)
			}
			platforms = append(platforms, file.OS+"/"+file.Architecture)
		}
		digest, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return digest.String(), platforms
	}
	a, platforms := index()
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("the index lists %v, want %v", platforms, want)
	}
	if b, _ := index(); a != b {
		t.Errorf("two builds of the same index: %s and %s", a, b)
	}
}

func TestParseDockerfile(t *testing.T) {
	const dockerfile = `# a comment
ARG VERSION=0.1.0
FROM golang:1.26 AS builder
WORKDIR /workspace
ENV CGO_ENABLED=0
RUN go build \
    -o manager .

FROM scratch
WORKDIR /opt
WORKDIR cloudspace
LABEL a=1 \
      b="two words"
LABEL org.opencontainers.image.version=${VERSION}
ENV PATH=/usr/local/bin HOME=/home/coder
ENV PATH /bin
EXPOSE 8080 53/udp
USER 65532:65532
CMD ["ignored"]
ENTRYPOINT ["/manager"]
CMD ["--flag"]
`
	got, err := ParseDockerfile(strings.NewReader(dockerfile), map[string]string{"VERSION": "0.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Entrypoint:   []string{"/manager"},
		Cmd:          []string{"--flag"},
		User:         "65532:65532",
		WorkingDir:   "/opt/cloudspace",
		Env:          []string{"HOME=/home/coder", "PATH=/bin"},
		ExposedPorts: []string{"8080/tcp", "53/udp"},
		Labels:       map[string]string{"a": "1", "b": "two words", "org.opencontainers.image.version": "0.2.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestParseDockerfileStageFromStage(t *testing.T) {
	got, err := ParseDockerfile(strings.NewReader("FROM scratch AS base\nUSER 1000\nFROM base\nEXPOSE 80\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.User != "1000" || len(got.ExposedPorts) != 1 {
		t.Fatalf("got %+v, want the base stage's user and the port", got)
	}
}

// TestIndexSizeCountsASharedLayerOnce: a registry stores a blob once, so an index whose
// images share a layer (the VM disk's, the same for every platform) costs it once.
func TestIndexSizeCountsASharedLayerOnce(t *testing.T) {
	layer, err := Layer([]Entry{Bytes("/disk/disk.qcow2", bytes.Repeat([]byte("guest"), 1<<16), 0o644)})
	if err != nil {
		t.Fatal(err)
	}
	layerSize, err := layer.Size()
	if err != nil {
		t.Fatal(err)
	}
	var imgs []v1.Image
	var alone int64
	for _, arch := range []string{Amd64, "arm64"} {
		img, err := ImageFor(arch, Config{}, layer)
		if err != nil {
			t.Fatal(err)
		}
		size, err := Size(img)
		if err != nil {
			t.Fatal(err)
		}
		alone += size
		imgs = append(imgs, img)
	}
	idx, err := Index(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	size, err := IndexSize(idx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := idx.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	if want := alone - layerSize + int64(len(raw)); size != want {
		t.Errorf("index size %d, want %d: both images (%d) with their shared layer (%d) once, and the index", size, want, alone, layerSize)
	}
}
