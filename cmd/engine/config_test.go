package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/stages/ingress/jspull"
	"github.com/rocketstore/engine/stages/ingress/replicated"
	"github.com/rocketstore/engine/stages/ingress/route"
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
commit_log_cache: 512MB
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
max_groups: 500
group_heartbeat: "2s"
group_session_timeout: "5s"
group_rebalance_timeout: "10s"
group_max_members: 600
group_max_group_members: 60
dispatch_stop_timeout: "3s"
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
topics: ["device.*.temp", "orders.>=orders_all"]
no_subject_tags: true
max_topics: 64
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
memory_limit: 1GiB
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
no_console: true
console_user: ops
console_password: "c0nsole"
console_actions: true
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
	if r.MemoryLimit != 1<<30 {
		t.Errorf("memory_limit %d", r.MemoryLimit)
	}
	opts, nopts := r.options(zerolog.Nop())
	opts.Logger = zerolog.Logger{}
	want := engine.Options{
		Dir: filepath.Join(dir, "store"), FlushMode: engine.FlushAsync,
		CommitLogFileSize: 64 << 20, CommitLogCache: 512 << 20, ConsumeQueueUnits: 5000, IndexSlots: 1000, IndexEntries: 4000,
		NoIndex: true, NoPropCRC: true, MmapWrites: true, MaxBodySize: 1 << 20, StoreHost: netip.MustParseAddrPort("10.0.0.1:10912"),
		DedupeWindow: 90 * time.Second, DedupeMax: 1000,
		FlushInterval: 250 * time.Millisecond, FlushLeastPages: -1, FlushThoroughInterval: 5 * time.Second,
		CQFlushInterval: 2 * time.Second, CQFlushLeastPages: 3, CQFlushThoroughInterval: 30 * time.Second,
		SlowSync: 2 * time.Second, OffsetPersistInterval: 7 * time.Second, DispatchStopTimeout: 3 * time.Second, MaxGroups: 500,
		FileReservedTime: 24 * time.Hour, DeleteWhen: "03;15", CleanInterval: 20 * time.Second, CleanFirstDelay: 30 * time.Second,
		DiskMaxUsedRatio: 0.7, DiskCleanForciblyRatio: 0.8, DiskWarningRatio: 0.88, DeleteFilesPerPass: 4, NoRetention: true,
	}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("engine options\n got %+v\nwant %+v", opts, want)
	}
	wantN := engine.NATSOptions{
		URL: "nats://a:4222,nats://b:4222", Listen: "127.0.0.1:4333", ServerConfig: filepath.Join(dir, "nats.conf"),
		QueueGroup: "workers", TopicTokens: 1, QueuesPerTopic: 16, MaxTopics: 64, NoSubjectTags: true,
		Topics:           []route.TopicPattern{{Subjects: "device.*.temp", Topic: "device"}, {Subjects: "orders.>", Topic: "orders_all"}},
		Partitions:       &route.Partitions{Prefix: "rmq.q", Count: 16, Owned: []int{0, 1, 2, 3, 9}},
		PartitionSources: []string{"orders.*"},
		Replicated:       &replicated.Config{StreamPrefix: "P_", Replicas: 5, MaxAge: 24 * time.Hour, PinnedTTL: 3 * time.Second, Consumer: "hot", Name: "e-1"},
		Ownership:        &engine.Ownership{Bucket: "OWN", Replicas: 1, EngineID: "e-1"},
		KeysHeader:       "X-Keys", TagsHeader: "X-Tags", QueueKeyHeader: "X-Shard", Workers: 3,
		PendingMsgs: -1, PendingBytes: 32 << 20, NoReply: true, Name: "store-1",
		JetStream: &jspull.Config{Stream: "ORDERS", Consumer: "store", FilterSubject: "orders.eu"},
		NoReadAPI: true, APIPrefix: "RS.API", MaxLongPolls: 16, MaxReplays: 2, Version: version,
		Groups: groups.Config{HeartbeatInterval: 2 * time.Second, SessionTimeout: 5 * time.Second, RebalanceTimeout: 10 * time.Second,
			MaxMembers: 600, MaxGroupMembers: 60},
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
