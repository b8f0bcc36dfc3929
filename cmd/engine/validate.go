package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/stages/ingress"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// validate checks the whole configuration of `engine run` and reports every problem at once,
// each naming its key and where its value came from. It starts nothing.
func (r *runCmd) validate() error {
	v := &validator{r: r}
	v.store()
	v.flush()
	v.retention()
	v.ingress()
	v.partitions()
	v.connection()
	v.embedded()
	v.readAPI()
	if err := errors.Join(v.errs...); err != nil {
		return &configError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	return nil
}

type validator struct {
	r    *runCmd
	errs []error
}

func (v *validator) bad(key, format string, args ...any) {
	src := v.r.describeSource(v.r.sourceOf(key))
	v.errs = append(v.errs, fmt.Errorf("  %s (from %s): %s", key, src, fmt.Sprintf(format, args...)))
}

func (v *validator) positive(key string, d time.Duration) {
	if d <= 0 {
		v.bad(key, "%v: must be a positive duration", d)
	}
}

func (v *validator) atLeast(key string, n, least int) {
	if n < least {
		v.bad(key, "%d: must be at least %d", n, least)
	}
}

func (v *validator) store() {
	r := v.r
	if r.Store == "" {
		v.bad("store", "empty: give the store directory")
	}
	if r.CommitLogSize <= 0 || r.CommitLogSize > math.MaxInt32 {
		v.bad("commit_log_size", "%d: must be positive and at most %d bytes (RocketMQ's int file size)", r.CommitLogSize, math.MaxInt32)
	}
	v.atLeast("cq_units", r.CQUnits, 1)
	v.atLeast("index_slots", r.IndexSlots, 1)
	v.atLeast("index_entries", r.IndexEntries, 1)
	for _, n := range []struct {
		key string
		v   int
	}{{"index_slots", r.IndexSlots}, {"index_entries", r.IndexEntries}} {
		if n.v > math.MaxInt32 {
			v.bad(n.key, "%d: at most %d (the IndexFile header's counts are 32-bit)", n.v, math.MaxInt32)
		}
	}
	if r.MaxBody <= 0 || int64(r.MaxBody) > math.MaxInt32-64<<10 {
		v.bad("max_body", "%d: must be positive and below 2 GiB - 64 KiB (NATS payloads are 32-bit)", r.MaxBody)
	}
	if _, err := netip.ParseAddrPort(r.StoreHost); err != nil {
		v.bad("store_host", "%q: want an IP address and port, e.g. 127.0.0.1:10911 (%v)", r.StoreHost, err)
	}
	v.positive("dedupe_window", r.DedupeWindow)
	v.atLeast("dedupe_max", r.DedupeMax, 0)
}

func (v *validator) flush() {
	r := v.r
	v.positive("flush_interval", r.FlushInterval)
	v.positive("flush_thorough_interval", r.FlushThoroughInterval)
	v.positive("cq_flush_interval", r.CQFlushInterval)
	v.positive("cq_flush_thorough_interval", r.CQFlushThoroughInterval)
	v.positive("slow_sync", r.SlowSync)
	v.positive("offset_persist_interval", r.OffsetPersistInterval)
	v.atLeast("flush_least_pages", r.FlushLeastPages, 0)
	v.atLeast("cq_flush_least_pages", r.CQFlushLeastPages, 0)
}

func (v *validator) retention() {
	r := v.r
	v.positive("file_reserved_time", r.FileReservedTime)
	v.positive("clean_interval", r.CleanInterval)
	v.positive("clean_first_delay", r.CleanFirstDelay)
	v.atLeast("delete_files_per_pass", r.DeleteFilesPerPass, 1)
	if err := (engine.Retention{DeleteWhen: r.DeleteWhen}).Validate(); err != nil || strings.Trim(r.DeleteWhen, "; ") == "" {
		v.bad("delete_when", "%q: want hours of the day 0-23 separated by ';', e.g. \"04\" or \"04;16\"", r.DeleteWhen)
	}
	// RocketMQ clamps these silently; a value outside its bounds is surely a mistake here.
	for _, c := range []struct {
		key    string
		v      float64
		lo, hi float64
	}{
		{"disk_max_used_ratio", r.DiskMaxUsedRatio, 0.10, 0.95},
		{"disk_clean_forcibly_ratio", r.DiskCleanForciblyRatio, 0.30, 0.85},
		{"disk_warning_ratio", r.DiskWarningRatio, 0.35, 0.90},
	} {
		if math.IsNaN(c.v) || c.v < c.lo || c.v > c.hi {
			v.bad(c.key, "%v: must be a fraction of the disk between %.2f and %.2f (RocketMQ's bounds)", c.v, c.lo, c.hi)
		}
	}
}

func (v *validator) ingress() {
	r := v.r
	if r.JSStream == "" {
		if len(r.Subjects) == 0 {
			v.bad("subjects", "no subject: give at least one (\">\" stores every subject)")
		}
		for i, s := range r.Subjects {
			if why := checkSubscription(s); why != "" {
				v.bad("subjects", "%q: %s", s, why)
				continue
			}
			for _, prev := range r.Subjects[:i] {
				if checkSubscription(prev) == "" && natssubject.Overlap(prev, s) {
					v.bad("subjects", "%q and %q overlap: a message on both would be stored twice (NATS delivers it once per subscription); keep one of them", prev, s)
				}
			}
		}
	} else if r.sourceOf("subjects") != sourceDefault {
		v.bad("subjects", "not with js_stream: the stream's consumer decides what is stored (js_filter narrows it)")
	}
	if r.JSStream == "" && r.JSFilter != "" {
		v.bad("js_filter", "needs js_stream")
	}
	v.atLeast("topic_tokens", r.TopicTokens, 0)
	v.atLeast("max_topics", r.MaxTopics, -1)
	for _, s := range r.Topics {
		if _, err := route.ParseTopicPattern(s); err != nil {
			v.bad("topics", "%v", err)
		}
	}
	if err := route.CheckTopicPatterns(r.topicPatterns()); err != nil {
		v.bad("topics", "%v", err)
	}
	v.atLeast("queues", r.Queues, 1)
	if r.Queues > ingress.MaxQueuesPerTopic {
		v.bad("queues", "%d: at most %d (a queue id is a 32-bit int)", r.Queues, ingress.MaxQueuesPerTopic)
	}
	for _, h := range []struct{ key, name string }{{"keys_header", r.KeysHeader}, {"tags_header", r.TagsHeader}, {"queue_key_header", r.QueueKeyHeader}} {
		if h.name == "" && h.key == "queue_key_header" {
			continue
		}
		if why := checkHeaderName(h.name); why != "" {
			v.bad(h.key, "%q: %s", h.name, why)
		} else if strings.EqualFold(h.name, "Nats-Msg-Id") {
			v.bad(h.key, "%q is the message id header (it becomes UNIQ_KEY): pick another", h.name)
		}
	}
	if strings.EqualFold(r.KeysHeader, r.TagsHeader) {
		v.bad("tags_header", "%q is also keys_header: they must differ", r.TagsHeader)
	}
	v.atLeast("max_streams", r.MaxStreams, 1)
	v.positive("stream_idle", r.StreamIdle)
	v.atLeast("workers", r.Workers, 0)
	if r.PendingMsgs == 0 || r.PendingMsgs < -1 {
		v.bad("pending_msgs", "%d: must be positive, or -1 for no limit", r.PendingMsgs)
	}
	if r.PendingBytes == 0 {
		v.bad("pending_bytes", "0: must be positive, or -1 for no limit")
	}
	if r.MemoryLimit < 0 || (r.MemoryLimit > 0 && r.MemoryLimit < minMemoryLimit) {
		v.bad("memory_limit", "%d: must be 0 (no limit) or at least %d (32MiB): below that the collector would run without pause", r.MemoryLimit, minMemoryLimit)
	}
	v.positive("drain_timeout", r.DrainTimeout)
}

// minMemoryLimit is the smallest --memory-limit taken: an engine's own buffers and the embedded
// server need about that before any message is held.
const minMemoryLimit = 32 << 20

func (v *validator) connection() {
	r := v.r
	if r.Server != "" {
		for u := range strings.SplitSeq(r.Server, ",") {
			if why := checkServerURL(strings.TrimSpace(u)); why != "" {
				v.bad("server", "%q: %s", u, why)
			}
		}
	}
	var methods []string
	for _, m := range []struct{ key, v string }{{"creds", r.Creds}, {"nkey", r.Nkey}, {"user", r.User}, {"token", r.Token}} {
		if m.v != "" {
			methods = append(methods, m.key)
		}
	}
	if len(methods) > 1 {
		v.bad(methods[1], "give one way to authenticate, not %s", strings.Join(methods, " and "))
	}
	if r.Password != "" && r.User == "" {
		v.bad("password", "needs user")
	}
	for _, f := range []struct{ key, path string }{{"creds", r.Creds}, {"nkey", r.Nkey}, {"tlscert", r.TLSCert}, {"tlskey", r.TLSKey}, {"tlsca", r.TLSCA}} {
		if f.path == "" {
			continue
		}
		if fh, err := os.Open(f.path); err != nil {
			v.bad(f.key, "%v", err)
		} else {
			fh.Close()
		}
	}
	if (r.TLSCert == "") != (r.TLSKey == "") {
		v.bad("tlscert", "a client certificate needs both tlscert and tlskey")
	}
	if r.ConnectionName == "" {
		v.bad("connection_name", "empty")
	}
	v.positive("reconnect_wait", r.ReconnectWait)
}

func (v *validator) embedded() {
	r := v.r
	if r.Server != "" {
		if r.NATSConfig != "" {
			v.bad("nats_config", "configures the embedded server: not with server (an external one)")
		}
		if r.sourceOf("listen") != sourceDefault {
			v.bad("listen", "is the embedded server's address: not with server (an external one)")
		}
		return
	}
	if r.NATSConfig == "" || r.sourceOf("listen") != sourceDefault {
		host, port, err := net.SplitHostPort(r.Listen)
		if err == nil {
			var n int
			if n, err = strconv.Atoi(port); err == nil && (n < -1 || n > 65535) {
				err = errors.New("port out of range")
			}
		}
		if err != nil {
			v.bad("listen", "%q: want host:port, e.g. 127.0.0.1:4222, port -1 for any free one (%v)", r.Listen, err)
		}
		_ = host
	}
	if r.NATSConfig != "" {
		if _, err := server.ProcessConfigFile(r.NATSConfig); err != nil {
			v.bad("nats_config", "%v", err)
		}
	}
}

func (v *validator) readAPI() {
	r := v.r
	if !r.NoReadAPI {
		if why := natssubject.Check(r.APIPrefix, false); why != "" {
			v.bad("api_prefix", "%q: %s", r.APIPrefix, why)
		}
		v.atLeast("max_long_polls", r.MaxLongPolls, 1)
		v.atLeast("max_replays", r.MaxReplays, 1)
		v.positive("group_heartbeat", r.GroupHeartbeat)
		v.positive("group_rebalance_timeout", r.GroupRebalanceTimeout)
		if r.GroupSessionTimeout < 2*r.GroupHeartbeat {
			v.bad("group_session_timeout", "%s: at least twice group_heartbeat (%s), or a member that heartbeats on time can be taken out", r.GroupSessionTimeout, r.GroupHeartbeat)
		}
		v.atLeast("group_max_members", r.GroupMaxMembers, 1)
		v.atLeast("group_max_group_members", r.GroupMaxGroupMembers, 1)
	}
	if r.MaxGroups < -1 || r.MaxGroups == 0 {
		v.bad("max_groups", "%d: at least 1, or -1 for no bound", r.MaxGroups)
	}
	if r.HTTP != "" {
		if _, _, err := net.SplitHostPort(r.HTTP); err != nil {
			v.bad("http", "%q: want host:port, e.g. 127.0.0.1:8222 (%v)", r.HTTP, err)
		}
	} else if r.Pprof {
		v.bad("pprof", "needs http (pprof is served on the monitoring address)")
	}
	if r.ConsoleActions && r.ConsolePassword == "" {
		v.bad("console_actions", "needs console_password: a console request that changes state must carry credentials")
	}
}

// checkSubscription checks a subject to subscribe to; it says what is wrong, "" if nothing.
func checkSubscription(s string) string {
	if why := natssubject.Check(s, true); why != "" {
		return why
	}
	switch {
	case s == "_INBOX" || strings.HasPrefix(s, "_INBOX."):
		return "reply inboxes are never stored (their messages are acks and replies)"
	case strings.HasPrefix(s, "$"):
		return "$-subjects (system, JetStream and API subjects) are never stored"
	}
	return ""
}

// checkHeaderName checks a header name (an HTTP token).
func checkHeaderName(h string) string {
	if h == "" {
		return "empty header name"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return fmt.Sprintf("byte %q at %d is not allowed in a header name", c, i)
		}
	}
	return ""
}

// checkServerURL checks one NATS server URL (nats.go adds nats:// to a bare host:port).
func checkServerURL(s string) string {
	if s == "" {
		return "an empty URL in the list"
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return err.Error()
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Sprintf("scheme %q: want nats://, tls://, ws:// or wss://", u.Scheme)
	}
	if u.Hostname() == "" {
		return "no host"
	}
	return ""
}
