package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/CONFIG.md and README.md "Run it as a service": the configuration file, the environment
// and the flags, checked with `engine run -t` as the docs show, and in force in a running engine.

// setting is one key of `engine run -t`'s output: its value as printed and where it came from.
type setting struct{ value, source string }

var checkLine = regexp.MustCompile(`^([a-z_]+): (.*?)\s+# (.+)$`)

// checkConfig runs `engine run -t` with args and env; it returns the exit code, the settings
// printed and stderr.
func checkConfig(t *testing.T, env []string, args ...string) (int, map[string]setting, string) {
	t.Helper()
	r := runCLIEnv(t, env, append([]string{"run", "-t"}, args...)...)
	out := map[string]setting{}
	for _, line := range strings.Split(r.stdout, "\n") {
		if m := checkLine.FindStringSubmatch(line); m != nil {
			out[m[1]] = setting{m[2], m[3]}
		}
	}
	return r.code, out, r.stderr
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckConfigREADME: the README's engine.conf, checked with `-t`: "print every key, its
// value and its source; exit 0 or 2". As printed there it names a credentials file this
// machine does not have, which is an error naming the file and the key (2); with a credentials
// file that exists, every key it sets is printed with the file as its source (0).
func TestCheckConfigREADME(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	readme := `store: /var/lib/rocketstore
subjects: [ "orders.>", "billing.>" ]
server: "nats://n1:4222,nats://n2:4222"
creds: /etc/rocketstore/engine.creds
file_reserved_time: "48h"
http: "127.0.0.1:8222"
`
	conf := writeFile(t, filepath.Join(dir, "engine.conf"), readme)
	code, _, stderr := checkConfig(t, nil, "-c", conf)
	if code != 2 || !strings.Contains(stderr, "creds (from file "+conf+")") {
		t.Fatalf("-t on the README's file without its credentials file: exit %d, %q", code, stderr)
	}

	creds := writeFile(t, filepath.Join(dir, "engine.creds"), "")
	conf = writeFile(t, conf, strings.Replace(readme, "/etc/rocketstore/engine.creds", creds, 1))
	code, got, stderr := checkConfig(t, nil, "-c", conf)
	if code != 0 {
		t.Fatalf("-t on the README's file: exit %d, %s", code, stderr)
	}
	for k, v := range map[string]string{
		"store": `"/var/lib/rocketstore"`, "subjects": `["orders.>", "billing.>"]`, "server": `"nats://n1:4222,nats://n2:4222"`,
		"creds": `"` + creds + `"`, "file_reserved_time": `"48h0m0s"`, "http": `"127.0.0.1:8222"`,
	} {
		if got[k] != (setting{v, "file"}) {
			t.Errorf("%s: %+v, want %s from the file", k, got[k], v)
		}
	}
	if got["flush"] != (setting{`"sync"`, "default"}) || len(got) < 80 {
		t.Errorf("-t printed %d keys (flush %+v): not every key with its default", len(got), got["flush"])
	}
}

// TestRunDefaults: the README's table of flags gives their defaults; `-t` with nothing set
// prints the same.
func TestRunDefaults(t *testing.T) {
	t.Parallel()
	code, got, stderr := checkConfig(t, nil)
	if code != 0 {
		t.Fatalf("-t: exit %d, %s", code, stderr)
	}
	for k, v := range map[string]string{
		"listen": `"127.0.0.1:4222"`, "subjects": `[">"]`, "queue_group": `""`, "flush": `"sync"`, "topic_tokens": "0",
		"commit_log_size": `"1GiB"`, "cq_units": "300000", "index_slots": "5000000", "index_entries": "20000000",
		"max_body": `"4MiB"`, "dedupe_window": `"2m0s"`, "queues": "4", "server": `""`,
	} {
		if got[k] != (setting{v, "default"}) {
			t.Errorf("%s: %+v, want the README's default %s", k, got[k], v)
		}
	}
	// ./store: a path, printed as the absolute path it is in the working directory.
	if s := got["store"]; s.source != "default" || !strings.HasSuffix(s.value, `/store"`) {
		t.Errorf("store: %+v, want ./store by default", s)
	}
}

// TestConfigPrecedence: flag > environment > file > default, for every kind of source, in `-t`
// and in a running engine; the environment beats the file even when set to the empty string.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := writeFile(t, filepath.Join(dir, "engine.conf"), "queues: 2\nqueue_group: \"g\"\nmax_body: 1024\n")
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want setting
	}{
		{"default", nil, nil, setting{"4", "default"}},
		{"file", nil, []string{"-c", conf}, setting{"2", "file"}},
		{"env over file", []string{"ENGINE_QUEUES=3"}, []string{"-c", conf}, setting{"3", "env ENGINE_QUEUES"}},
		{"flag over env", []string{"ENGINE_QUEUES=3"}, []string{"-c", conf, "--queues", "5"}, setting{"5", "flag"}},
		{"ENGINE_CONFIG", []string{"ENGINE_CONFIG=" + conf}, nil, setting{"2", "file"}},
	} {
		code, got, stderr := checkConfig(t, c.env, c.args...)
		if code != 0 || got["queues"] != c.want {
			t.Errorf("%s: exit %d, queues %+v, want %+v (%s)", c.name, code, got["queues"], c.want, stderr)
		}
	}
	_, got, _ := checkConfig(t, []string{"ENGINE_QUEUE_GROUP="}, "-c", conf)
	if got["queue_group"] != (setting{`""`, "env ENGINE_QUEUE_GROUP"}) {
		t.Errorf("an empty variable over the file: queue_group %+v, want the variable's empty value", got["queue_group"])
	}

	// In force: the file says 1024 bytes, the environment 2048, a flag 4096.
	body := func(n int) string { return strings.Repeat("x", n) }
	t.Run("running", func(t *testing.T) {
		t.Parallel()
		store := t.TempDir()
		e := startEngineOpts(t, store, procOpts{args: runArgs(store, "-c", conf, "--queue-group", ""), env: []string{"ENGINE_MAX_BODY=2048"}})
		nc := connect(t, e.url)
		stored(t, nc, msg("prec.a", body(1500)))
		if a, raw := request(t, nc, msg("prec.a", body(3000))); a.Error == nil || a.Error.Code != 413 {
			t.Fatalf("a 3000-byte body with the variable at 2048: %s, want 413", raw)
		}
		e.stop()
		e = startEngineOpts(t, store, procOpts{args: runArgs(store, "-c", conf, "--queue-group", "", "--max-body", "4096"), env: []string{"ENGINE_MAX_BODY=2048"}})
		stored(t, connect(t, e.url), msg("prec.a", body(3000)))
		e.stop()
	})
}

// TestConfigFileFormat: the nats-server config format as CONFIG.md describes it: `#` and `//`
// comments, `key: value`, `key = value` and `key value`, lists, include, variables from the
// environment, case-insensitive keys, nats-server's unquoted sizes (8MB is 8 MiB) and quoted
// flag syntax ("1GB" is 10^9 bytes), quoted durations.
func TestConfigFileFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "more.conf"), "queues = 6\n")
	conf := writeFile(t, filepath.Join(dir, "engine.conf"), `# a comment
// another comment
LOG_LEVEL = debug
include more.conf
subjects [ "orders.x", $OTHER ]
max_body: 8MB
commit_log_size: "1GB"
dedupe_window: "5m"
store /tmp/somewhere
`)
	code, got, stderr := checkConfig(t, []string{"OTHER=billing.y"}, "-c", conf)
	if code != 0 {
		t.Fatalf("-t: exit %d, %s", code, stderr)
	}
	for k, v := range map[string]string{
		"log_level": `"debug"`, "queues": "6", "subjects": `["orders.x", "billing.y"]`, "max_body": `"8MiB"`,
		"commit_log_size": `"1000000000B"`, "dedupe_window": `"5m0s"`, "store": `"/tmp/somewhere"`,
	} {
		if got[k] != (setting{v, "file"}) {
			t.Errorf("%s: %+v, want %s from the file", k, got[k], v)
		}
	}

}

// TestCheckConfigOutputIsConfig: CONFIG.md: "The output is itself a valid configuration file":
// fed back with -c, the output of -t is accepted and gives the same values back, each now from
// the file, with the defaults -t prints as comments (not in effect: here listen with an
// external server, subjects and queues with partitions) printed so again, as defaults.
func TestCheckConfigOutputIsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := writeFile(t, filepath.Join(dir, "engine.conf"), "queues: 6\nsubjects: [\"orders.>\"]\nmax_body: 8MB\n")
	commented := regexp.MustCompile(`(?m)^# [a-z_]+: .*$`)
	for _, args := range [][]string{nil, {"-c", conf}, {"--partitions", "8", "--owned-partitions", "0-3", "--server", "nats://127.0.0.1:4999"}} {
		out := runCLI(t, append([]string{"run", "-t"}, args...)...).stdout
		got := map[string]setting{}
		for _, line := range strings.Split(out, "\n") {
			if m := checkLine.FindStringSubmatch(line); m != nil {
				got[m[1]] = setting{m[2], m[3]}
			}
		}
		again := writeFile(t, filepath.Join(dir, "again.conf"), out)
		code, got2, stderr := checkConfig(t, nil, "-c", again)
		if code != 0 {
			t.Fatalf("-t %v, its output fed back: exit %d, %s", args, code, stderr)
		}
		if len(got) < 80 || len(got2) != len(got) {
			t.Errorf("-t %v printed %d keys, fed back %d", args, len(got), len(got2))
		}
		for k, s := range got {
			if got2[k] != (setting{s.value, "file"}) {
				t.Errorf("-t %v: %s: %+v read back as %+v", args, k, s, got2[k])
			}
		}
		out2 := runCLI(t, "run", "-t", "-c", again).stdout
		if a, b := commented.FindAllString(out, -1), commented.FindAllString(out2, -1); strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("-t %v: the defaults not in effect\n%s\nread back as\n%s", args, strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
	}
}

// TestConfigFileVariables: CONFIG.md: "variables ($NAME, set in the file or taken from the
// environment)": a variable set in the file (NAME: value, then $NAME) gives its value.
func TestConfigFileVariables(t *testing.T) {
	t.Parallel()
	conf := writeFile(t, filepath.Join(t.TempDir(), "engine.conf"), "SUBJ: \"orders.x\"\nsubjects: [ $SUBJ ]\n")
	code, got, stderr := checkConfig(t, nil, "-c", conf)
	if code != 0 || got["subjects"] != (setting{`["orders.x"]`, "file"}) {
		t.Fatalf("a variable set in the file: exit %d, subjects %+v, %s", code, got["subjects"], stderr)
	}
}

// TestConfigErrors: an unknown key, a value of the wrong type or a value its key does not
// accept is an error naming the file and the key, exit 2; an unquoted duration is refused with
// a hint; the subjects are checked as CONFIG.md lists (inboxes, $-subjects, overlaps), with the
// message it shows, and so are the declared topics (none of subjects never stored); a bad flag is
// a usage error (2).
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		name, file string
		args       []string
		want       []string
	}{
		{"unknown key", "nope_key: 1\n", nil, []string{"nope_key"}},
		{"wrong type", "queues: \"many\"\n", nil, []string{"queues"}},
		{"unquoted duration", "dedupe_window: 2m\n", nil, []string{"dedupe_window", "write a duration as a quoted string"}},
		{"refused value", "flush: sometimes\n", nil, []string{"flush"}},
		{"inbox", "", []string{"--subjects", "orders.>,_INBOX.>"}, []string{`subjects (from flag): "_INBOX.>": reply inboxes are never stored (their messages are acks and replies)`}},
		{"$-subject", "", []string{"--subjects", "$JS.API.>"}, []string{`"$JS.API.>"`, "never stored"}},
		{"overlap", "", []string{"--subjects", "orders.>,orders.eu"}, []string{"overlap"}},
		{"declared inbox topic", "", []string{"--topics", "_INBOX.>"}, []string{`topics (from flag): topic pattern "_INBOX.>"`, "never stored"}},
		{"declared $-topic", "", []string{"--topics", "orders.*,$SYS.>=sys"}, []string{`topic pattern "$SYS.>"`, "never stored"}},
		{"bad flag", "", []string{"--no-such-flag"}, []string{"--no-such-flag"}},
	} {
		args := c.args
		conf := ""
		if c.file != "" {
			conf = writeFile(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".conf"), c.file)
			args = append([]string{"-c", conf}, args...)
		}
		code, _, stderr := checkConfig(t, nil, args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (%s)", c.name, code, stderr)
		}
		want := c.want
		if conf != "" {
			want = append(want, conf)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", c.name, stderr, w)
			}
		}
	}
	// The same checks stop `engine run` itself before it starts.
	r := runCLI(t, "run", "--store", t.TempDir(), "--subjects", "_INBOX.>")
	if r.code != 2 {
		t.Errorf("run with an inbox subject: exit %d, want 2", r.code)
	}
	// A topic declared for subjects that are never stored is not declared: nothing is written.
	store := t.TempDir()
	if r := runCLI(t, "run", "--store", store, "--topics", "$SYS.>=sys"); r.code != 2 || !strings.Contains(r.stderr, "never stored") {
		t.Errorf("run with a $-topic: exit %d, %q; want 2 and why", r.code, r.stderr)
	}
	if fileExists(t, filepath.Join(store, "config", "subjectTags.json")) {
		t.Error("run with a $-topic wrote subjectTags.json")
	}
}
