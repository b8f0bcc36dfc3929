package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
)

// TestCheckConfigRoundTrip: what -t prints is a configuration file that gives the same
// configuration back (secrets aside: they are printed hidden): every key in its format (the
// file sets every key, so keys that exclude each other: it is parsed, not checked), then
// configurations `engine run` accepts, which it must accept again (checkOutputRuns).
func TestCheckConfigRoundTrip(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := writeConf(t, filepath.Join(dir, "engine.conf"), everyKey(dir))
	t.Setenv("ENGINE_QUEUES", "12")
	r := mustParse(t, "run", "-c", file, "--max-body", "2MiB")
	var out bytes.Buffer
	r.printConfig(&out)
	for _, line := range []string{
		`queues: 12`, `# env ENGINE_QUEUES`, `max_body: "2MiB"`, `password: "<hidden>"`, `api_prefix: "RS.API"`,
		`subjects: ["orders.>", "billing.*"]`, `pending_msgs: -1`, `disk_warning_ratio: 0.88`, `# file`,
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("-t output lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "s3cret") || strings.Contains(out.String(), "t0ken") || strings.Contains(out.String(), "c0nsole") {
		t.Errorf("-t printed a secret:\n%s", out.String())
	}
	os.Unsetenv("ENGINE_QUEUES")
	again := writeConf(t, filepath.Join(dir, "again.conf"), out.String())
	r2 := mustParse(t, "run", "-c", again)
	for i, s := range r.settings {
		s2 := r2.settings[i]
		if s.key != s2.key {
			t.Fatalf("order: %s, %s", s.key, s2.key)
		}
		if secret[s.key] {
			continue
		}
		if a, b := formatValue(s.value), formatValue(s2.value); a != b || s2.source != sourceFile {
			t.Errorf("%s: %s, read back as %s from %s", s.key, a, b, s2.source)
		}
	}
	checkOutputRuns(t)
}

// printedLine is one key of -t's output: a setting, or a default not in effect (a comment,
// with why).
var printedLine = regexp.MustCompile(`^(# )?([a-z_]+): (.*?) +# ([^;]*)(; .*)?$`)

// printedKeys parses -t's output: key -> [commented, value, source, why].
func printedKeys(t *testing.T, out string) map[string][4]string {
	t.Helper()
	keys := map[string][4]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if m := printedLine.FindStringSubmatch(line); m != nil {
			keys[m[2]] = [4]string{m[1], m[3], m[4], m[5]}
		}
	}
	return keys
}

// checkOutputRuns: -t's output is a configuration `engine run` accepts (validate) and that
// gives the same configuration back: `engine run -c engine.conf -t > full.conf && engine run -c
// full.conf -t` prints the same values, each key now from the file, in every mode whose checks
// depend on what is set (partitions, an external server, nats_config, js_stream); a default
// that is not in effect is printed as a comment saying why, and stays a default.
func checkOutputRuns(t *testing.T) {
	dir := t.TempDir()
	creds := writeConf(t, filepath.Join(dir, "user.creds"), "")
	natsConf := writeConf(t, filepath.Join(dir, "nats.conf"), "port: 4333\n")
	for _, c := range []struct {
		name, file string
		env, args  []string
		comments   []string // keys printed as comments
	}{
		{name: "defaults"},
		{name: "file, environment and flags", file: "queues: 6\nsubjects: [\"orders.>\"]\nmax_body: 8MB\nuser: u\npassword: p\n",
			env: []string{"ENGINE_FLUSH=async", "NATS_TOKEN="}, args: []string{"--http", "127.0.0.1:8333", "--nkey", ""}},
		{name: "external server", file: "server: \"nats://a:4222\"\ncreds: " + creds + "\n", comments: []string{"listen"}},
		{name: "nats_config", file: "nats_config: " + natsConf + "\n", comments: []string{"listen"}},
		{name: "nats_config with listen", file: "nats_config: " + natsConf + "\nlisten: \"127.0.0.1:4222\"\n"},
		{name: "js_stream", file: "js_stream: ORDERS\njs_filter: orders.eu\n", comments: []string{"subjects"}},
		{name: "partitions", file: "partitions: 16\nowned_partitions: \"0-3\"\npartition_subjects: [\"orders.*\"]\n",
			comments: []string{"subjects", "queues"}},
		{name: "partitions from a bucket", file: "partitions: 16\nownership: kv\nengine_id: e-1\n", comments: []string{"subjects", "queues"}},
		{name: "replicated partitions", file: "partitions: 16\nowned_partitions: \"0-15\"\nreplicated: true\nqueues: 16\n", comments: []string{"subjects"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--store", filepath.Join(dir, "store")}, c.args...)
			if c.file != "" {
				args = append(args, "-c", writeConf(t, filepath.Join(dir, "engine.conf"), c.file))
			}
			for _, kv := range c.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			r := mustParse(t, args...)
			if err := r.validate(); err != nil {
				t.Fatalf("the configuration: %v", err)
			}
			var out bytes.Buffer
			r.printConfig(&out)
			for _, kv := range c.env {
				k, _, _ := strings.Cut(kv, "=")
				os.Unsetenv(k)
			}

			full := writeConf(t, filepath.Join(dir, "full.conf"), out.String())
			r2 := mustParse(t, "run", "-c", full)
			if err := r2.validate(); err != nil {
				t.Fatalf("-t's output as the configuration: %v\n%s", err, out.String())
			}
			var out2 bytes.Buffer
			r2.printConfig(&out2)
			first, second := printedKeys(t, out.String()), printedKeys(t, out2.String())
			if len(first) != len(r.settings) || len(second) != len(first) {
				t.Fatalf("-t printed %d keys, then %d, of %d", len(first), len(second), len(r.settings))
			}
			for _, s := range r.settings {
				a, b := first[s.key], second[s.key]
				a[2], b[2] = strings.TrimSuffix(a[2], " (value hidden)"), strings.TrimSuffix(b[2], " (value hidden)")
				commented := slices.Contains(c.comments, s.key)
				if (a[0] != "") != commented || a[2] != s.source || commented && a[3] == "" {
					t.Errorf("%s printed as %q", s.key, a)
				}
				want := sourceFile
				if commented {
					want = sourceDefault
				}
				if b[0] != a[0] || b[1] != a[1] || b[2] != want || b[3] != a[3] {
					t.Errorf("%s: printed %q, read back and printed %q", s.key, a, b)
				}
			}
		})
	}
}

// TestConfigEmptyValues: an empty value means what the key's default means, from a flag, a
// variable or the file: an empty path names no file (not the working directory), and a key
// that holds its default is not set for the checks that ask (replicated: false needs no
// partitions), while its source stays where it came from.
func TestConfigEmptyValues(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := writeConf(t, filepath.Join(dir, "engine.conf"), `creds: ""
nkey: ""
tlscert: ""
tlskey: ""
tlsca: ""
nats_config: ""
owned_partitions: ""
partition_subjects: []
replicated: false
ownership: "config"
engine_id: ""
`)
	t.Setenv("NATS_CREDS", "")
	t.Setenv("ENGINE_CONFIG", "")
	r := mustParse(t, "run", "--store", dir, "-c", file, "--tlsca", "")
	if r.Creds != "" || r.Nkey != "" || r.TLSCert != "" || r.TLSKey != "" || r.TLSCA != "" || r.NATSConfig != "" {
		t.Errorf("empty paths: creds %q nkey %q tlscert %q tlskey %q tlsca %q nats_config %q", r.Creds, r.Nkey, r.TLSCert, r.TLSKey, r.TLSCA, r.NATSConfig)
	}
	if err := r.validate(); err != nil {
		t.Errorf("empty values: %v", err)
	}
	for key, src := range map[string]string{"creds": "env NATS_CREDS", "tlsca": sourceFlag, "replicated": sourceFile, "engine_id": sourceFile} {
		if got := r.sourceOf(key); got != src {
			t.Errorf("%s from %s, want %s", key, got, src)
		}
	}
	// $ENGINE_CONFIG set to the empty string names no file either.
	os.Unsetenv("NATS_CREDS")
	if r := mustParse(t, "run"); r.file != nil || r.Config != "" {
		t.Errorf("ENGINE_CONFIG=\"\": file %+v", r.file)
	}
	// A value other than the default still needs partitions.
	writeConf(t, file, "replicated: true\nownership: kv\nowned_partitions: \"0\"\n")
	err := mustParse(t, "run", "--store", dir, "-c", file).validate()
	for _, key := range []string{"replicated", "ownership", "owned_partitions"} {
		if err == nil || !strings.Contains(err.Error(), key+" (from file "+file+"): needs partitions") {
			t.Errorf("%s set without partitions: %v", key, err)
		}
	}
}

// TestConfigFileVariables: the file may set variables for itself, as nats-server's files do
// (NAME: value, then $NAME, also in a list and from an included file, and through another
// variable); a name that is no key and that no $NAME uses is still an unknown key.
func TestConfigFileVariables(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	writeConf(t, filepath.Join(dir, "vars.conf"), "REGION: \"eu\"\nQ = 7\n")
	file := writeConf(t, filepath.Join(dir, "engine.conf"), `include vars.conf
ORDERS: "orders.x"
N: $Q
subjects: [ $ORDERS, "billing.y" ]
queues: $N
queue_group: $REGION
`)
	r := mustParse(t, "run", "-c", file)
	if !reflect.DeepEqual(r.Subjects, []string{"orders.x", "billing.y"}) || r.Queues != 7 || r.QueueGroup != "eu" {
		t.Errorf("subjects %q, queues %d, queue group %q", r.Subjects, r.Queues, r.QueueGroup)
	}
	if r.sourceOf("queues") != sourceFile {
		t.Errorf("queues from %s", r.sourceOf("queues"))
	}
	for _, tc := range []struct{ text, want string }{
		{"ORDERS: \"orders.x\"\nsubjects: [\"a\"]\n", `unknown key "orders" (did you mean "workers"? a variable set in the file must be used: $ORDERS)`},
		{"X: 1\nqueus: $X\n", `unknown key "queus" (did you mean "queues"?)`},
	} {
		writeConf(t, file, tc.text)
		_, err := parseArgs(t, "run", "-c", file)
		var cerr *configError
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	// A variable named as a key is that key too, as in nats-server.
	writeConf(t, file, "QUEUES: 3\ntopic_tokens: $QUEUES\n")
	if r := mustParse(t, "run", "-c", file); r.Queues != 3 || r.TopicTokens != 3 {
		t.Errorf("a variable named queues: queues %d, topic_tokens %d", r.Queues, r.TopicTokens)
	}
}

// TestConfigFileErrors: a file that cannot be used is refused, naming the file and the key.
func TestConfigFileErrors(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", "queue: 3", `unknown key "queue" (did you mean "queues"?)`},
		{"unquoted duration", "dedupe_window: 2m", `dedupe_window: 2000000 is a number, not a duration`},
		{"bad value", "queues: many", `queues: `},
		{"bad enum", "flush: maybe", `flush: "maybe" is not one of sync, async`},
		{"block", "store { dir: x }", `store: a block`},
		{"empty list item", `subjects: [a, ""]`, `subjects: item 2 of the list is empty`},
		{"syntax", "queues: [", `config file`},
		{"same key twice", "server: a\nnats: b", `are the same key`},
	} {
		file := writeConf(t, filepath.Join(dir, "bad.conf"), tc.text)
		_, err := parseArgs(t, "run", "-c", file)
		var cerr *configError
		if !errors.As(err, &cerr) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: %v, want a config error with %q naming the file", tc.name, err, tc.want)
		}
	}
	if _, err := parseArgs(t, "run", "-c", filepath.Join(dir, "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing file: %v", err)
	}
	// The environment beats the file even where the file's value would be invalid for the
	// key: the file's value is checked, and refused.
	file := writeConf(t, filepath.Join(dir, "bad.conf"), "queues: many")
	t.Setenv("ENGINE_QUEUES", "3")
	if _, err := parseArgs(t, "run", "-c", file); err == nil {
		t.Error("an invalid file value accepted because the environment overrides it")
	}
}

// TestConfigValidation: invalid values are refused with their key and source, all at once.
func TestConfigValidation(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--subjects", "orders.>,_INBOX.>,$JS.API.>,a b,a..b,orders.eu"}, []string{
			`subjects (from flag): "_INBOX.>": reply inboxes are never stored`,
			`"$JS.API.>": $-subjects`,
			`"a b": whitespace`,
			`"a..b": an empty token`,
			`"orders.>" and "orders.eu" overlap`,
		}},
		{[]string{"--subjects", ""}, []string{`subjects (from flag): no subject`}},
		{[]string{"--subjects", "a,,b"}, []string{`subjects (from flag): "": empty subject`}},
		{[]string{"--subjects", ">,orders.eu"}, []string{`">" and "orders.eu" overlap`}},
		{[]string{"--delete-when", "25", "--disk-warning-ratio", "0.99", "--queues", "0", "--dedupe-window", "0s"}, []string{
			`delete_when (from flag): "25"`, `disk_warning_ratio (from flag): 0.99: must be a fraction of the disk between 0.35 and 0.90`,
			`queues (from flag): 0: must be at least 1`, `dedupe_window (from flag): 0s: must be a positive duration`,
		}},
		{[]string{"--keys-header", "Nats-Msg-Id", "--tags-header", "Bad Header"}, []string{`is the message id header`, `"Bad Header": byte ' '`}},
		{[]string{"--server", "nats://a:4222,http://b", "--nats-config", "x.conf", "--listen", "127.0.0.1:1"}, []string{
			`server (from flag): "http://b": scheme "http"`, `nats_config (from flag): configures the embedded server`, `listen (from flag): is the embedded server's address`,
		}},
		{[]string{"--user", "u", "--token", "t", "--creds", filepath.Join(dir, "nope.creds")}, []string{
			`give one way to authenticate, not creds and user and token`, `nope.creds: no such file`,
		}},
		{[]string{"--password", "p", "--tlscert", filepath.Join(dir, "nope.pem")}, []string{`password (from flag): needs user`, `both tlscert and tlskey`}},
		{[]string{"--store-host", "localhost", "--pprof", "--listen", "nohost"}, []string{`store_host (from flag): "localhost"`, `pprof (from flag): needs http`, `listen (from flag): "nohost"`}},
		{[]string{"--js-filter", "x"}, []string{`js_filter (from flag): needs js_stream`}},
		{[]string{"--http", "127.0.0.1:0", "--console-actions"}, []string{`console_actions (from flag): needs console_password`}},
		{[]string{"--queues", "4294967296"}, []string{`queues (from flag): 4294967296: at most 2147483647`}},
		{[]string{"--commit-log-size", "2GiB", "--index-slots", "4294967296", "--index-entries", "4294967297"}, []string{
			`commit_log_size (from flag): 2147483648: must be positive and at most 2147483647`,
			`index_slots (from flag): 4294967296: at most 2147483647`, `index_entries (from flag): 4294967297: at most`,
		}},
	} {
		r := mustParse(t, append([]string{"run", "--store", dir}, tc.args...)...)
		err := r.validate()
		var cerr *configError
		if !errors.As(err, &cerr) {
			t.Errorf("%v: %v, want a config error", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error lacks %q:\n%v", tc.args, w, err)
			}
		}
	}
	file := writeConf(t, filepath.Join(dir, "engine.conf"), `subjects: ["_INBOX.>"]`)
	err := mustParse(t, "run", "-c", file).validate()
	if err == nil || !strings.Contains(err.Error(), `subjects (from file `+file+`): "_INBOX.>"`) {
		t.Errorf("a file's subject: %v", err)
	}
	if err := mustParse(t, "run", "--store", dir).validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestCheckConfigCommand: `engine run -t` prints the configuration and exits 0, or says what is
// wrong and exits 2; it starts nothing.
func TestCheckConfigCommand(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	file := writeConf(t, filepath.Join(dir, "engine.conf"), "store: "+store+"\nqueues: 8\n")
	code, out, errOut := runBinary(t, "run", "-t", "-c", file, "--flush", "async")
	if code != 0 || !regexp.MustCompile(`(?m)^queues: 8 +# file$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^flush: "async" +# flag$`).MatchString(out) || !strings.Contains(out, "# configuration file ("+file+")") {
		t.Fatalf("valid: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Fatalf("-t created the store: %v", err)
	}
	if _, err := conf.Parse(out); err != nil {
		t.Fatalf("-t output is not a configuration file: %v", err)
	}

	for _, tc := range []struct {
		text, want string
		args       []string
	}{
		{"subjects: [orders.>, \"_INBOX.>\"]\n", `subjects (from file ` + file + `): "_INBOX.>": reply inboxes are never stored`, nil},
		{"queuez: 8\n", `unknown key "queuez" (did you mean "queues"?)`, nil},
		{"queues: 8\n", `"8x"`, []string{"--queues", "8x"}},
	} {
		writeConf(t, file, tc.text)
		code, out, errOut := runBinary(t, append([]string{"run", "--check-config", "-c", file}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || tc.args == nil && out != "" {
			t.Errorf("%q: exit %d, want 2 with %q\nstdout:\n%s\nstderr:\n%s", tc.text, code, tc.want, out, errOut)
		}
	}
}

// TestConfigDocumented: docs/CONFIG.md lists every key with its default and environment
// variable, as the flags define them.
func TestConfigDocumented(t *testing.T) {
	clearEnv(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		rows[key] = []string{strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3]), strings.TrimSpace(cells[4])}
	}
	r := mustParse(t, "run")
	for _, s := range r.settings {
		row, ok := rows[s.key]
		if !ok {
			t.Errorf("docs/CONFIG.md: no row for %s", s.key)
			continue
		}
		delete(rows, s.key)
		flag := "`--" + s.flag.Name + "`"
		if s.flag.Short != 0 {
			flag = "`-" + string(s.flag.Short) + "`, " + flag
		}
		for _, a := range s.flag.Aliases {
			flag += ", `--" + a + "`"
		}
		if row[0] != flag {
			t.Errorf("%s: flag cell %q, want %s", s.key, row[0], flag)
		}
		env := "`" + strings.Join(s.flag.Envs, "`, `") + "`"
		if row[1] != env {
			t.Errorf("%s: env cell %q, want %s", s.key, row[1], env)
		}
		def := "`" + formatValue(s.value) + "`"
		if s.flag.Tag.Type == "path" && s.flag.HasDefault {
			def = "`" + quote(s.flag.Default) + "`" // as written, not made absolute
		}
		if row[2] != def {
			t.Errorf("%s: default cell %q, want %s", s.key, row[2], def)
		}
	}
	for key := range rows {
		t.Errorf("docs/CONFIG.md documents %s, which is no key", key)
	}
}
