package main

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/stages/ingress"
)

// clearEnv unsets every ENGINE_* and NATS_* variable for the test (restored after it), so that
// the environment the tests run in changes no setting.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ENGINE_") || strings.HasPrefix(name, "NATS_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

// parseArgs parses a command line as main does, in this process.
func parseArgs(t *testing.T, args ...string) (*cli, error) {
	t.Helper()
	var c cli
	p, err := newParser(&c)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Parse(args)
	return &c, err
}

func mustParse(t *testing.T, args ...string) *runCmd {
	t.Helper()
	c, err := parseArgs(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return &c.Run
}

func writeConf(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// settingOf is the setting of key.
func settingOf(t *testing.T, r *runCmd, key string) (string, string) {
	t.Helper()
	for _, s := range r.settings {
		if s.key == key {
			return formatValue(s.value), s.source
		}
	}
	t.Fatalf("no setting %q", key)
	return "", ""
}

// TestConfigPrecedence: flag > environment > file > default, key by key, for the command's keys
// and the global ones, and for natscli's variable (NATS_URL) and alias (--nats).
func TestConfigPrecedence(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := writeConf(t, filepath.Join(dir, "engine.conf"), `
# every level of the precedence, key by key
store: `+filepath.Join(dir, "from-file")+`
queues: 8                      // file, then env
dedupe_window: "5m"            # file, env, then flag
file_reserved_time: "48h"      # file only
log_level: debug               # a global key
subjects: [orders.>, "billing.*"]
server: "nats://file:4222"
delete_when: "03;15"
`)
	t.Setenv("ENGINE_QUEUES", "6")
	t.Setenv("ENGINE_DEDUPE_WINDOW", "3m")
	t.Setenv("ENGINE_DELETE_WHEN", "01")
	t.Setenv("NATS_URL", "nats://env:4222")
	r := mustParse(t, "run", "-c", file, "--dedupe-window", "1m", "--nats", "nats://flag:4222", "--topic-tokens", "2")

	for _, want := range []struct{ key, value, source string }{
		{"store", `"` + filepath.Join(dir, "from-file") + `"`, sourceFile},
		{"queues", "6", "env ENGINE_QUEUES"},
		{"dedupe_window", `"1m0s"`, sourceFlag},
		{"file_reserved_time", `"48h0m0s"`, sourceFile},
		{"log_level", `"debug"`, sourceFile},
		{"subjects", `["orders.>", "billing.*"]`, sourceFile},
		{"server", `"nats://flag:4222"`, sourceFlag},
		{"delete_when", `"01"`, "env ENGINE_DELETE_WHEN"},
		{"topic_tokens", "2", sourceFlag},
		{"max_body", `"4MiB"`, sourceDefault},
		{"flush", `"sync"`, sourceDefault},
	} {
		if v, src := settingOf(t, r, want.key); v != want.value || src != want.source {
			t.Errorf("%s = %s from %s, want %s from %s", want.key, v, src, want.value, want.source)
		}
	}
	if r.Queues != 6 || r.DedupeWindow != time.Minute || r.FileReservedTime != 48*time.Hour || r.Server != "nats://flag:4222" {
		t.Errorf("fields: queues %d, dedupe %v, reserved %v, server %q", r.Queues, r.DedupeWindow, r.FileReservedTime, r.Server)
	}

	// Without the flags, the environment wins over the file; without the environment, the
	// file wins over the defaults.
	r = mustParse(t, "run", "-c", file)
	if v, src := settingOf(t, r, "server"); v != `"nats://env:4222"` || src != "env NATS_URL" {
		t.Errorf("server = %s from %s, want the environment's", v, src)
	}
	os.Unsetenv("NATS_URL")
	os.Unsetenv("ENGINE_QUEUES")
	r = mustParse(t, "run", "-c", file)
	if v, src := settingOf(t, r, "server"); v != `"nats://file:4222"` || src != sourceFile {
		t.Errorf("server = %s from %s, want the file's", v, src)
	}
	if r.Queues != 8 {
		t.Errorf("queues %d, want the file's 8", r.Queues)
	}

	// The file named by the environment.
	t.Setenv("ENGINE_CONFIG", file)
	r = mustParse(t, "run")
	if r.FileReservedTime != 48*time.Hour || r.file == nil || r.file.path != file {
		t.Errorf("$ENGINE_CONFIG: reserved %v, file %+v", r.FileReservedTime, r.file)
	}
	// With the default command too: `engine -c FILE` is `engine run -c FILE`.
	os.Unsetenv("ENGINE_CONFIG")
	c, err := parseArgs(t, "-c", file)
	if err != nil || c.Run.FileReservedTime != 48*time.Hour {
		t.Errorf("default command: %v, reserved %v", err, c.Run.FileReservedTime)
	}
}

// everyKey is a configuration file that sets every key to a value other than its default.
func everyKey(dir string) string {
	return `
log_level: warn
log_format: json
gc_percent: 300
store: ` + filepath.Join(dir, "store") + `
commit_log_size: 64MB            # sizes as nats-server writes them: 64MB is 64 MiB
cq_units: 5000
index_slots: 1000
index_entries: 4000
no_index: true
no_prop_crc: true
mmap_writes: true
max_body: "1MiB"                 # or as the flags take them
store_host: "10.0.0.1:10912"
dedupe_window: "90s"
dedupe_max: 1000
flush: async
flush_interval: "250ms"
flush_least_pages: 0
flush_thorough_interval: "5s"
cq_flush_interval: "2s"
cq_flush_least_pages: 3
cq_flush_thorough_interval: "30s"
slow_sync: "2s"
offset_persist_interval: "7s"
file_reserved_time: "24h"
delete_when: "03;15"
clean_interval: "20s"
clean_first_delay: "30s"
disk_max_used_ratio: 0.7
disk_clean_forcibly_ratio: 0.8
disk_warning_ratio: 0.88
delete_files_per_pass: 4
no_retention: true
subjects: ["orders.>", "billing.*"]
queue_group: workers
topic_tokens: 1
queues: 16
keys_header: X-Keys
tags_header: X-Tags
queue_key_header: X-Shard
no_reply: true
no_batched_acks: true
max_streams: 500
stream_idle: "5m"
workers: 3
pending_msgs: -1
pending_bytes: 32MB
drain_timeout: "10s"
partitions: 16
owned_partitions: "0-3,9"
partition_prefix: "rmq.q"
partition_subjects: ["orders.*"]
ownership: kv
engine_id: "e-1"
ownership_bucket: "OWN"
ownership_replicas: 1
replicated: true
stream_prefix: "P_"
stream_replicas: 5
stream_max_age: "24h"
replicated_consumer: "hot"
pinned_ttl: "3s"
js_stream: ORDERS
js_consumer: store
js_filter: "orders.eu"
server: [ "nats://a:4222", "nats://b:4222" ]
creds: ` + filepath.Join(dir, "user.creds") + `
nkey: ` + filepath.Join(dir, "user.nk") + `
user: engine
password: s3cret
token: t0ken
tlscert: ` + filepath.Join(dir, "cert.pem") + `
tlskey: ` + filepath.Join(dir, "key.pem") + `
tlsca: ` + filepath.Join(dir, "ca.pem") + `
tlsfirst: true
connection_name: store-1
reconnect_wait: "500ms"
listen: "127.0.0.1:4333"
nats_config: ` + filepath.Join(dir, "nats.conf") + `
no_read_api: true
api_prefix: "RS.API"
max_long_polls: 16
max_replays: 2
http: "127.0.0.1:8333"
pprof: true
`
}

// TestConfigEveryKey: every key of the file is read, from the file, into the engine's options.
func TestConfigEveryKey(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := writeConf(t, filepath.Join(dir, "engine.conf"), everyKey(dir))
	c, err := parseArgs(t, "run", "-c", file)
	if err != nil {
		t.Fatal(err)
	}
	r := &c.Run
	for _, s := range r.settings {
		if s.source != sourceFile {
			t.Errorf("%s: from %s; the test file sets every key", s.key, s.source)
		}
	}
	if c.LogLevel != "warn" || c.LogFormat != "json" || c.GCPercent != 300 {
		t.Errorf("global keys: %q %q %d", c.LogLevel, c.LogFormat, c.GCPercent)
	}
	opts, nopts := r.options(zerolog.Nop())
	opts.Logger = zerolog.Logger{}
	want := engine.Options{
		Dir: filepath.Join(dir, "store"), FlushMode: engine.FlushAsync,
		CommitLogFileSize: 64 << 20, ConsumeQueueUnits: 5000, IndexSlots: 1000, IndexEntries: 4000,
		NoIndex: true, NoPropCRC: true, MmapWrites: true, MaxBodySize: 1 << 20, StoreHost: netip.MustParseAddrPort("10.0.0.1:10912"),
		DedupeWindow: 90 * time.Second, DedupeMax: 1000,
		FlushInterval: 250 * time.Millisecond, FlushLeastPages: -1, FlushThoroughInterval: 5 * time.Second,
		CQFlushInterval: 2 * time.Second, CQFlushLeastPages: 3, CQFlushThoroughInterval: 30 * time.Second,
		SlowSync: 2 * time.Second, OffsetPersistInterval: 7 * time.Second,
		FileReservedTime: 24 * time.Hour, DeleteWhen: "03;15", CleanInterval: 20 * time.Second, CleanFirstDelay: 30 * time.Second,
		DiskMaxUsedRatio: 0.7, DiskCleanForciblyRatio: 0.8, DiskWarningRatio: 0.88, DeleteFilesPerPass: 4, NoRetention: true,
	}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("engine options\n got %+v\nwant %+v", opts, want)
	}
	wantN := engine.NATSOptions{
		URL: "nats://a:4222,nats://b:4222", Listen: "127.0.0.1:4333", ServerConfig: filepath.Join(dir, "nats.conf"),
		QueueGroup: "workers", TopicTokens: 1, QueuesPerTopic: 16,
		Partitions:       &ingress.Partitions{Prefix: "rmq.q", Count: 16, Owned: []int{0, 1, 2, 3, 9}},
		PartitionSources: []string{"orders.*"},
		Replicated:       &ingress.ReplicatedSource{StreamPrefix: "P_", Replicas: 5, MaxAge: 24 * time.Hour, PinnedTTL: 3 * time.Second, Consumer: "hot", Name: "e-1"},
		Ownership:        &engine.Ownership{Bucket: "OWN", Replicas: 1, EngineID: "e-1"},
		KeysHeader:       "X-Keys", TagsHeader: "X-Tags", QueueKeyHeader: "X-Shard", Workers: 3,
		PendingMsgs: -1, PendingBytes: 32 << 20, NoReply: true, Name: "store-1",
		JetStream: &ingress.JetStreamSource{Stream: "ORDERS", Consumer: "store", FilterSubject: "orders.eu"},
		NoReadAPI: true, APIPrefix: "RS.API", MaxLongPolls: 16, MaxReplays: 2, Version: version,
		NoBatchedAcks: true, MaxStreams: 500, StreamIdle: 5 * time.Minute,
		Creds: filepath.Join(dir, "user.creds"), Nkey: filepath.Join(dir, "user.nk"), User: "engine", Password: "s3cret", Token: "t0ken",
		TLSCert: filepath.Join(dir, "cert.pem"), TLSKey: filepath.Join(dir, "key.pem"), TLSCA: filepath.Join(dir, "ca.pem"), TLSFirst: true,
		ReconnectWait: 500 * time.Millisecond, DrainTimeout: 10 * time.Second,
	}
	if !reflect.DeepEqual(nopts, wantN) {
		t.Errorf("NATS options\n got %+v\nwant %+v", nopts, wantN)
	}
	if r.HTTP != "127.0.0.1:8333" || !r.Pprof {
		t.Errorf("monitoring: %q %v", r.HTTP, r.Pprof)
	}
}

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
	if strings.Contains(out.String(), "s3cret") || strings.Contains(out.String(), "t0ken") {
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

// fakeTarget records what a reload applies.
type fakeTarget struct {
	mu        sync.Mutex
	level     *zerolog.Level
	retention *engine.Retention
}

func (f *fakeTarget) SetLogLevel(l zerolog.Level) { f.mu.Lock(); f.level = &l; f.mu.Unlock() }
func (f *fakeTarget) SetRetention(r engine.Retention) error {
	if err := r.Validate(); err != nil {
		return err
	}
	f.mu.Lock()
	f.retention = &r
	f.mu.Unlock()
	return nil
}

// TestReloadApplies: a reload reads the file again and applies the log level and the retention
// settings, refuses the rest (needs a restart), lets flags and variables still win, and changes
// nothing when the new configuration is invalid.
func TestReloadApplies(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "engine.conf")
	writeConf(t, file, "store: "+dir+"\nlog_level: info\nfile_reserved_time: \"72h\"\nqueues: 4\n")
	t.Setenv("ENGINE_DISK_WARNING_RATIO", "0.80")
	r := mustParse(t, "run", "-c", file, "--delete-files-per-pass", "3")
	var logs bytes.Buffer
	log := zerolog.New(&logs)

	// Nothing changed: nothing applied.
	tgt := &fakeTarget{}
	if applied, refused := r.reloadInto(tgt, log); len(applied)+len(refused) != 0 || tgt.retention != nil || tgt.level != nil {
		t.Fatalf("unchanged file: applied %v, refused %v", applied, refused)
	}

	writeConf(t, file, "store: "+dir+`
log_level: debug
file_reserved_time: "48h"
delete_when: "03;15"
disk_max_used_ratio: 0.7
disk_warning_ratio: 0.85     # the environment still wins
delete_files_per_pass: 5     # the flag still wins
queues: 8                    # needs a restart
no_index: true               # needs a restart
`)
	applied, refused := r.reloadInto(tgt, log)
	if want := []string{"log_level", "file_reserved_time", "delete_when", "disk_max_used_ratio"}; !reflect.DeepEqual(applied, want) {
		t.Errorf("applied %v, want %v", applied, want)
	}
	if want := []string{"no_index", "queues"}; !reflect.DeepEqual(refused, want) {
		t.Errorf("refused %v, want %v", refused, want)
	}
	want := engine.Retention{FileReservedTime: 48 * time.Hour, DeleteWhen: "03;15", CleanInterval: 10 * time.Second,
		DiskMaxUsedRatio: 0.7, DiskCleanForciblyRatio: 0.85, DiskWarningRatio: 0.80, DeleteFilesPerPass: 3}
	if tgt.retention == nil || *tgt.retention != want {
		t.Errorf("retention %+v, want %+v", tgt.retention, want)
	}
	if tgt.level == nil || *tgt.level != zerolog.DebugLevel {
		t.Errorf("level %v, want debug", tgt.level)
	}
	for _, line := range []string{`"key":"queues","running":"4","new":"8"`, `reload: not applied, this setting needs a restart`,
		`"key":"file_reserved_time","from":"72h0m0s","to":"48h0m0s"`, `"message":"config reloaded"`} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %s:\n%s", line, logs.String())
		}
	}

	// Again: the applied keys run with their new values now; the refused ones are still told.
	tgt = &fakeTarget{}
	applied, refused = r.reloadInto(tgt, log)
	if len(applied) != 0 || len(refused) != 2 || tgt.retention != nil {
		t.Errorf("second reload: applied %v, refused %v, retention %+v", applied, refused, tgt.retention)
	}

	// An invalid file changes nothing.
	writeConf(t, file, "store: "+dir+"\nlog_level: trace\ndelete_when: \"25\"\n")
	logs.Reset()
	if applied, _ := r.reloadInto(tgt, log); len(applied) != 0 || tgt.retention != nil || tgt.level != nil ||
		!strings.Contains(logs.String(), "reload refused: the configuration is invalid") {
		t.Errorf("invalid file: applied %v\n%s", applied, logs.String())
	}
	writeConf(t, file, "store: "+dir+"\nlog_levle: trace\n")
	logs.Reset()
	if applied, _ := r.reloadInto(tgt, log); len(applied) != 0 || !strings.Contains(logs.String(), `unknown key`) {
		t.Errorf("unknown key: applied %v\n%s", applied, logs.String())
	}
}
