// Package rmqfixture finds the stores Apache RocketMQ 5.3.3 itself wrote
// (shared/fixtures/rocketmq-5.3.3, read-only, laid beside the repository) and copies them for
// tests that write. Tests use it; nothing else does.
package rmqfixture

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Env names a directory holding the fixtures, for a checkout that is not beside shared/.
const Env = "ROCKETSTORE_RMQ_FIXTURES"

// rel is where the fixtures lie below some ancestor of the working directory.
var rel = filepath.Join("shared", "fixtures", "rocketmq-5.3.3")

// The sizes RocketMQ's MessageStoreConfig had for both stores (the fixtures' README).
const (
	CommitLogSize = 4 << 20
	CQUnits       = 500
	IndexSlots    = 2000
	IndexEntries  = 8000
)

// Dir returns the fixtures directory: $ROCKETSTORE_RMQ_FIXTURES, or shared/fixtures/rocketmq-5.3.3
// in the nearest ancestor of the working directory that has it.
func Dir() (string, error) {
	if d := os.Getenv(Env); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, rel)); err == nil && st.IsDir() {
			return filepath.Join(d, rel), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("rmqfixture: no %s in any parent of %s (set %s)", rel, wd, Env)
		}
	}
}

// Copy copies the fixture name (a store directory such as "store-5000", or a file) to dst,
// with write permission, so that it may be recovered or repaired.
func Copy(name, dst string) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	src := filepath.Join(dir, name)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, r)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("rmqfixture: %s is not a regular file", p)
		}
		return copyFile(p, to)
	})
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}
