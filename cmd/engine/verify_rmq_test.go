package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rocketstore/engine/internal/rmqfixture"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

func fixtureArgs(dir string) []string {
	return []string{"--store", dir, "--commit-log-size", fmt.Sprint(rmqfixture.CommitLogSize), "--cq-units", fmt.Sprint(rmqfixture.CQUnits),
		"--index-slots", fmt.Sprint(rmqfixture.IndexSlots), "--index-entries", fmt.Sprint(rmqfixture.IndexEntries)}
}

// treeHashes hashes every file below dir.
func treeHashes(t testing.TB, dir string) map[string][32]byte {
	t.Helper()
	out := make(map[string][32]byte)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t testing.TB, what string, a, b map[string][32]byte) {
	t.Helper()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%s changed the store's files", what)
	}
}

// TestVerifyRepairRocketMQStores runs verify and repair as a user does, the binary as a child
// process, on copies of the stores RocketMQ 5.3.3 wrote (no __CRC32# property): verify exits 0
// and repair finds nothing to do and changes no byte. Then a torn record after RocketMQ's last
// one: repair --dry-run tells exactly what it would cut and changes nothing; repair tells it
// before it cuts, cuts exactly the torn record, and keeps every one of RocketMQ's.
func TestVerifyRepairRocketMQStores(t *testing.T) {
	for _, f := range []struct {
		name    string
		records int
		end     int64 // where RocketMQ's data ends
	}{{"store-5000", 5000, 6507299}, {"edge", 9, 2077}} {
		t.Run(f.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), f.name)
			rmqfixture.Copy(t, f.name, dir)
			args := fixtureArgs(dir)
			before := treeHashes(t, dir)
			code, out, errOut := runBinary(t, append([]string{"verify"}, args...)...)
			if code != 0 || !strings.Contains(out, "verdict: consistent") || !strings.Contains(out, fmt.Sprintf("%s records", count(f.records))) ||
				!strings.Contains(out, "whole-record CRC (where present)") {
				t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
			}
			code, out, errOut = runBinary(t, append([]string{"repair"}, args...)...)
			if code != 0 || !strings.Contains(out, "nothing to repair") {
				t.Fatalf("repair: exit %d\n%s\n%s", code, out, errOut)
			}
			sameTree(t, "a repair of a consistent store", before, treeHashes(t, dir))

			// Tear: the first 60 bytes of a record written after RocketMQ's last one.
			size := int64(rmqfixture.CommitLogSize)
			seg := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", f.end-f.end%size))
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			torn := append([]byte(nil), b[:60]...)
			binary.BigEndian.PutUint64(torn[commitlog.PosPhysicalOffset:], uint64(f.end))
			copy(b[f.end%size:], torn)
			if err := os.WriteFile(seg, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged := treeHashes(t, dir)
			code, out, errOut = runBinary(t, append([]string{"repair", "--dry-run"}, args...)...)
			cut := fmt.Sprintf("cut           %s [%d, %d): 0 records", filepath.Join("commitlog", filepath.Base(seg)), f.end, f.end+60)
			if code != 1 || !strings.Contains(out, "repair plan") || !strings.Contains(out, cut) || !strings.Contains(out, "dry run, nothing was changed") {
				t.Fatalf("repair --dry-run: exit %d, want the line %q\n%s\n%s", code, cut, out, errOut)
			}
			sameTree(t, "repair --dry-run", damaged, treeHashes(t, dir))

			code, out, errOut = runBinary(t, append([]string{"repair"}, args...)...)
			plan, done := strings.Index(out, cut), strings.Index(out, "\nrepair:\n")
			if code != 1 || plan < 0 || done < plan || !strings.Contains(out[done:], fmt.Sprintf("cut at %d", f.end)) {
				t.Fatalf("repair: exit %d (the plan must come before what was done)\n%s\n%s", code, out, errOut)
			}
			code, out, errOut = runBinary(t, append([]string{"verify"}, args...)...)
			if code != 0 || !strings.Contains(out, fmt.Sprintf("[0, %d), %s records", f.end, count(f.records))) {
				t.Fatalf("verify after repair: exit %d\n%s\n%s", code, out, errOut)
			}
		})
	}
}

// count formats n as verify's report does.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
