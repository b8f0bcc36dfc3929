package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEGroupExample: README.md's "Consume as a group", its shell part, on the README's three
// messages: engine consume --until-end writes each once, as get --json's objects, the first one
// the line the README shows (the fields it names, in its order, with its values), and exits 0;
// groups describe then prints the README's first line. (The Go part: TestREADMEGroupGo in
// engine/.)
func TestREADMEGroupExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "## Consume as a group")
	if i < 0 {
		t.Fatal("README.md has no \"Consume as a group\"")
	}
	section = section[i:]
	shown := regexp.MustCompile(`(?m)^(\{"topic":"orders_eu".*\})$`).FindStringSubmatch(section)
	described := regexp.MustCompile(`(?m)^(group billing on topic orders_eu: .*)$`).FindStringSubmatch(section)
	if shown == nil || described == nil || !strings.Contains(section, "consume --nats nats://127.0.0.1:4222 --group billing --topic orders_eu --until-end") {
		t.Fatal("README.md's group example changed: update this test")
	}

	e := startEngine(t, t.TempDir())
	nc := connect(t, e.url)
	for _, m := range readmeMsgs() {
		stored(t, nc, m)
	}
	out := mustCLI(t, "consume", "--nats", e.url, "--group", "billing", "--topic", "orders_eu", "--until-end")
	got := ndjson(t, out)
	if len(got) != 3 {
		t.Fatalf("consume --until-end wrote %d messages, want the 3:\n%s", len(got), out)
	}
	// The README's line with its "..." elisions: each field it shows, in its order, with its value.
	var first string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, `"uniqKey":"order-1"`) {
			first = l
		}
	}
	pos := 0
	for _, part := range strings.Split(strings.Trim(shown[1], "{}"), ",...,") {
		for _, field := range strings.Split(part, ",") {
			j := strings.Index(first[pos:], field)
			if j < 0 {
				t.Fatalf("README.md shows %s in %s; engine consume wrote\n%s", field, shown[1], first)
			}
			pos += j + len(field)
		}
	}
	desc := mustCLI(t, "groups", "describe", "billing", "--topic", "orders_eu", "--nats", e.url)
	if line, _, _ := strings.Cut(desc, "\n"); line != described[1] {
		t.Fatalf("groups describe prints %q, README.md shows %q", line, described[1])
	}
}
