package route

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rocketstore/engine/internal/natssubject"
)

// Partitioned ingest (docs/SCALE-OUT.md). Several engines share a topic's queues: NATS itself
// spreads the messages with an account subject mapping that every server accepting publishers
// carries, for example
//
//	"orders.*" -> "rmq.p.{{partition(64,1)}}.orders.{{wildcard(1)}}"
//
// (the partition is FNV-1a of the chosen wildcard tokens, mod P), and each engine subscribes,
// with plain subscriptions, to the partitions it owns: "rmq.p.<p>.>". The partition number is the
// RocketMQ queue id, so a queue's ConsumeQueue lives on one engine and keeps one key's messages
// in order. A message for a partition this engine does not own is refused (503): another engine
// owns it, and the publisher retries (with its Nats-Msg-Id) once the owner is back.

// Defaults of Partitions.
const (
	DefaultPartitionPrefix = "rmq.p"
	DefaultPartitionCount  = 64
	// MaxPartitions bounds P: every partition of a topic is a queue of it.
	MaxPartitions = 1024
)

// Partitions configures partitioned ingest (ingress's Config.Partitions).
type Partitions struct {
	// Prefix is the namespace the mapping puts messages in: "<Prefix>.<partition>.<subject>"
	// (DefaultPartitionPrefix, "rmq.p"). It must not be matched by any mapping's source, or a
	// message could be mapped twice (over a leafnode, for example).
	Prefix string
	// Count is P, the partitions (and queues) of every topic (DefaultPartitionCount, 64). Chosen
	// once: a key's partition is its hash mod P, so changing P moves keys between queues.
	Count int
	// Owned are the partitions this engine stores at the start, each in [0, Count). A
	// partition moves between engines with ingress's AddPartition and RemovePartition (SetOwned).
	Owned []int
	// Dynamic: ownership comes from elsewhere at run time (a key-value bucket): Owned may start
	// empty.
	Dynamic bool
	owned   []atomic.Bool // by partition: the partitions owned now
}

// Check checks p and returns it with its defaults.
func (p *Partitions) Check() (*Partitions, error) {
	c := *p
	if c.Prefix == "" {
		c.Prefix = DefaultPartitionPrefix
	}
	c.Prefix = strings.TrimSuffix(c.Prefix, ".")
	if problem := natssubject.Check(c.Prefix, false); problem != "" || strings.HasPrefix(c.Prefix, "$") ||
		strings.HasPrefix(c.Prefix, "_INBOX") {
		return nil, fmt.Errorf("ingress: partition prefix %q: not a subject without wildcards outside $ and _INBOX %s",
			c.Prefix, problem)
	}
	if c.Count == 0 {
		c.Count = DefaultPartitionCount
	}
	if c.Count < 1 || c.Count > MaxPartitions {
		return nil, fmt.Errorf("ingress: %d partitions: want 1 to %d", c.Count, MaxPartitions)
	}
	if len(c.Owned) == 0 && !c.Dynamic {
		return nil, errors.New("ingress: partitioned ingest without an owned partition")
	}
	c.owned = make([]atomic.Bool, c.Count)
	for _, o := range c.Owned {
		if o < 0 || o >= c.Count {
			return nil, fmt.Errorf("ingress: owned partition %d: want 0 to %d", o, c.Count-1)
		}
		c.owned[o].Store(true)
	}
	c.Owned = slices.Compact(slices.Sorted(slices.Values(c.Owned)))
	return &c, nil
}

// Subjects are the subscriptions of the owned partitions: "<Prefix>.<p>.>".
func (p *Partitions) Subjects() []string {
	out := make([]string, len(p.Owned))
	for i, o := range p.Owned {
		out[i] = PartitionSubject(p.Prefix, o) + ".>"
	}
	return out
}

// PartitionSubject is the subject prefix of partition part: "<prefix>.<part>".
func PartitionSubject(prefix string, part int) string {
	return strings.TrimSuffix(prefix, ".") + "." + strconv.Itoa(part)
}

// split parses "<Prefix>.<partition>.<subject>". ok is false when subject is not of that form (a
// partition number with a sign or a leading zero is not).
func (p *Partitions) split(subject string) (part int, rest string, ok bool) {
	tail, found := strings.CutPrefix(subject, p.Prefix+".")
	if !found {
		return 0, "", false
	}
	num, rest, found := strings.Cut(tail, ".")
	if !found || rest == "" || num == "" || len(num) > 4 || (len(num) > 1 && num[0] == '0') {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || num[0] == '+' {
		return 0, "", false
	}
	return n, rest, true
}

// Owns says whether partition part is this engine's now.
func (p *Partitions) Owns(part int) bool {
	return part >= 0 && part < len(p.owned) && p.owned[part].Load()
}

// SetOwned makes partition part (in [0, Count)) this engine's now, or no longer (ingress's
// partition hand-off).
func (p *Partitions) SetOwned(part int, owned bool) { p.owned[part].Store(owned) }

// OwnedNow lists the partitions owned now, ascending.
func (p *Partitions) OwnedNow() []int {
	var out []int
	for i := range p.owned {
		if p.owned[i].Load() {
			out = append(out, i)
		}
	}
	return out
}

// SplitPartitionSource splits a mapping source with its own partition count, "orders.*=16", into
// the subject and the count; a source without "=" has count (the engines' --partitions). A
// topic may have fewer partitions than the engines' count (queues past its own stay unused),
// never more.
func SplitPartitionSource(src string, count int) (subject string, n int, err error) {
	subject, num, found := strings.Cut(src, "=")
	if !found {
		return src, count, nil
	}
	n, err = strconv.Atoi(num)
	if err != nil || n < 1 || n > count {
		return "", 0, fmt.Errorf("ingress: mapping source %q: the count after '=' must be 1 to %d (the partitions)", src, count)
	}
	return subject, n, nil
}

// PartitionOf is the partition nats-server's {{partition(count, ...)}} gives a key (the chosen
// wildcard tokens of the subject, concatenated without a separator): FNV-1a (32 bits) mod count.
func PartitionOf(key string, count int) int {
	return int(fnv32(key) % uint32(count))
}

// PartitionMapping is the account subject mapping that partitions the subjects matching source into count
// partitions under prefix: every '*' token of source is a key token (hashed, in order) and is
// kept in the destination, as is a final '>'. For example, with prefix "rmq.p" and 64:
//
//	"orders.*"   -> "rmq.p.{{partition(64,1)}}.orders.{{wildcard(1)}}"
//	"orders.*.>" -> "rmq.p.{{partition(64,1)}}.orders.{{wildcard(1)}}.>"
//
// Every server that accepts publishers must carry the same mappings (a message is mapped where
// it enters NATS); `engine partition-map` prints them as a nats-server configuration block.
func PartitionMapping(prefix string, count int, source string) (dest string, err error) {
	if problem := natssubject.Check(source, true); problem != "" {
		return "", fmt.Errorf("ingress: mapping source %q: %s", source, problem)
	}
	prefix = strings.TrimSuffix(prefix, ".")
	if source == prefix || strings.HasPrefix(source, prefix+".") || strings.HasPrefix(source, "*") || strings.HasPrefix(source, ">") {
		return "", fmt.Errorf("ingress: mapping source %q could match the partitions' namespace %q: "+
			"messages would be mapped twice", source, prefix)
	}
	toks := strings.Split(source, ".")
	var args []string
	for i, t := range toks {
		if t == "*" {
			args = append(args, strconv.Itoa(len(args)+1))
			toks[i] = "{{wildcard(" + strconv.Itoa(len(args)) + ")}}"
		}
	}
	if len(args) == 0 {
		return "", fmt.Errorf("ingress: mapping source %q has no '*' token: the key a partition is "+
			"chosen by is one or more '*' tokens", source)
	}
	return fmt.Sprintf("%s.{{partition(%d,%s)}}.%s", prefix, count, strings.Join(args, ","), strings.Join(toks, ".")), nil
}
