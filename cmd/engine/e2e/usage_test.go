package e2e

import (
	"strings"
	"testing"
)

// TestUsageErrorSaysWhyFirst: a usage error prints its reason, then the command that shows the
// help, and nothing else (no page of help above the reason, nothing on stdout), and exits 2.
// README.md "Run it as a service" (exit codes) and "Read it back".
func TestUsageErrorSaysWhyFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		why, help  string
		helpPrints string // something the help it names prints
	}{
		{[]string{"get", "--topic", "orders_eu", "--queue", "2", "--no-such-flag"}, "--no-such-flag", "engine get --help", "--topic"},
		{[]string{"get", "--topic", "orders_eu", "--store", "."}, "--queue", "engine get --help", "--queue"},
		{[]string{"msg", "not-a-message-id"}, "not-a-message-id", "engine msg --help", "<msgid>"},
		{[]string{"run", "--flush", "sometimes"}, "sometimes", "engine run --help", "--flush"},
		{[]string{"no-such-command"}, "no-such-command", "engine --help", "partition-map"},
	} {
		r := runCLI(t, c.args...)
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		if r.code != 2 || r.stdout != "" || len(lines) != 2 {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %d lines %q; want 2, nothing, the reason and the help command",
				c.args, r.code, len(r.stdout), len(lines), r.stderr)
			continue
		}
		if !strings.HasPrefix(lines[0], "engine: error: ") || !strings.Contains(lines[0], c.why) {
			t.Errorf("%v: first line %q does not say why (%q)", c.args, lines[0], c.why)
		}
		if want := `Run "` + c.help + `" for help.`; lines[1] != want {
			t.Errorf("%v: second line %q, want %q", c.args, lines[1], want)
		}
		// The command it gives works.
		h := runCLI(t, strings.Fields(c.help)[1:]...)
		if h.code != 0 || !strings.Contains(h.stdout, c.helpPrints) {
			t.Errorf("%s: exit %d, stdout %q", c.help, h.code, h.stdout)
		}
	}
}
