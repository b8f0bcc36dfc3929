package commitlog

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora under testdata/fuzz")

// TestWriteFuzzCorpus writes the seed inputs of the fuzz targets as files in Go's corpus format
// under testdata/fuzz/<target>/, so that plain `go test` runs them and `go test -fuzz` starts from
// them. It runs only with -update-corpus; files the fuzzer found (crashers kept as regressions)
// have other names and are left alone.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	write := func(target string, i int, lines ...string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, l := range lines {
			body += l + "\n"
		}
		name := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range scanSeeds(t) {
		write("FuzzScan", i, fmt.Sprintf("[]byte(%q)", s), fmt.Sprintf("byte(%q)", byte(i%8)))
	}
	for i, s := range checkRecordSeeds() {
		write("FuzzCheckRecord", i, fmt.Sprintf("[]byte(%q)", s), fmt.Sprintf("byte(%q)", byte(i%8)))
	}
	pairs := [][2]string{{"KEYS", "a b"}, {"TAGS", "TagA"}, {"", "v"}, {"n\x01", "v"}, {PropCRC32, "0"}, {"é", "😀"}, {"a", "\xff"}}
	for i, s := range propertiesSeeds() {
		p := pairs[i%len(pairs)]
		write("FuzzProperties", i, fmt.Sprintf("[]byte(%q)", s), fmt.Sprintf("string(%q)", p[0]), fmt.Sprintf("string(%q)", p[1]))
	}
	for i, s := range msgIDSeeds() {
		write("FuzzParseOffsetMsgID", i, fmt.Sprintf("string(%q)", s))
	}
}
