// Package rmqfixture holds the stores Apache RocketMQ 5.3.3 itself wrote, as a compressed archive
// inside the repository (testdata/rocketmq-5.3.3.tar.gz, described by testdata/README.md), and
// unpacks them into a test's temporary directory. Tests use it; nothing else does.
//
// The archive is embedded rather than looked up on disk so that a test finds it from any package
// and any working directory, and a clone with nothing beside it passes its tests.
package rmqfixture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed testdata/rocketmq-5.3.3.tar.gz
var archive []byte

// root is the archive's top directory: every entry lies below it.
const root = "rocketmq-5.3.3"

// The sizes RocketMQ's MessageStoreConfig had for both stores (the fixtures' README).
const (
	CommitLogSize = 4 << 20
	CQUnits       = 500
	IndexSlots    = 2000
	IndexEntries  = 8000
)

// Dir unpacks every fixture into a new temporary directory of t and returns it. Its files are
// read-only, as the fixtures are what RocketMQ wrote: a test that writes uses Copy.
func Dir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unpack("", dir, 0o444); err != nil {
		t.Fatalf("rmqfixture: %v", err)
	}
	return dir
}

// Copy unpacks the fixture name (a store directory such as "store-5000", or a file such as
// "store-5000.jsonl") to dst, with write permission, so that it may be recovered or repaired.
func Copy(t testing.TB, name, dst string) {
	t.Helper()
	if err := unpack(name, dst, 0o644); err != nil {
		t.Fatalf("rmqfixture: %v", err)
	}
}

// unpack writes the archive's entries at or below name (all of them when name is "") under dst,
// each file with mode perm. Finding nothing under name is an error, so a misspelt fixture fails
// its test instead of giving it an empty store.
func unpack(name, dst string, perm os.FileMode) error {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return fmt.Errorf("the embedded archive testdata/rocketmq-5.3.3.tar.gz: %w", err)
	}
	tr := tar.NewReader(zr)
	want := path.Join(root, name)
	found := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the embedded archive testdata/rocketmq-5.3.3.tar.gz: %w", err)
		}
		p := path.Clean(h.Name)
		if p != want && !strings.HasPrefix(p, want+"/") {
			continue
		}
		rel, err := filepath.Rel(want, filepath.FromSlash(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q lies outside %q", h.Name, want)
		}
		to := filepath.Join(dst, rel)
		if p == want && h.Typeflag == tar.TypeReg {
			to = dst // a single file: dst is its name
		}
		found++
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(to, tr, perm); err != nil {
				return err
			}
		default:
			return fmt.Errorf("archive entry %q is not a file or a directory", h.Name)
		}
	}
	if found == 0 {
		return fmt.Errorf("no fixture %q in the embedded archive testdata/rocketmq-5.3.3.tar.gz", name)
	}
	return nil
}

func writeFile(name string, r io.Reader, perm os.FileMode) (err error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm|0o200)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	// The file is created writable so that it can be filled, then given its mode.
	return f.Chmod(perm)
}
