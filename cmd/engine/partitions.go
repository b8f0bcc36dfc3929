package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rocketstore/engine/engine/natsserver"
	"github.com/rocketstore/engine/stages/ingress/route"
)

// Partitioned ingest (docs/SCALE-OUT.md): the run flags' parsing and checks, and the
// partition-map command that prints the mappings every nats-server must carry.

// parseOwned parses a partition set: comma-separated numbers and inclusive ranges ("0-15,32").
func parseOwned(s string, count int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q: want a number or a range like 4-7", part)
		case a < 0 || b < a || b >= count:
			return nil, fmt.Errorf("%q: want partitions from 0 to %d, a range low to high", part, count-1)
		}
		for p := a; p <= b; p++ {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no partition")
	}
	return out, nil
}

// partitions checks the partition settings of `engine run`.
func (v *validator) partitions() {
	r := v.r
	if r.Partitions == 0 {
		for _, key := range []string{"owned_partitions", "partition_subjects", "replicated", "ownership", "engine_id"} {
			if !r.holdsDefault(key) {
				v.bad(key, "needs partitions (the partition count)")
			}
		}
		return
	}
	if r.Partitions < 0 || r.Partitions > route.MaxPartitions {
		v.bad("partitions", "%d: want 1 to %d (0: partitioned ingest off)", r.Partitions, route.MaxPartitions)
		return
	}
	if _, err := parseOwned(r.OwnedPartitions, r.Partitions); err != nil && (r.Ownership != "kv" || r.OwnedPartitions != "") {
		v.bad("owned_partitions", "%v: partitioned ingest needs the partitions this engine stores", err)
	}
	if r.sourceOf("subjects") != sourceDefault {
		v.bad("subjects", "not with partitions: the engine subscribes to its partitions (%s.<p>.>)", r.PartitionPrefix)
	}
	if r.QueueGroup != "" || r.JSStream != "" {
		v.bad("partitions", "not with queue_group or js_stream: each partition has one owner, subscribed plainly")
	}
	if r.sourceOf("queues") != sourceDefault && r.Queues != r.Partitions {
		v.bad("queues", "%d with %d partitions: a topic's queues are its partitions", r.Queues, r.Partitions)
	}
	if _, err := (&route.Partitions{Prefix: r.PartitionPrefix, Count: r.Partitions, Owned: []int{0}}).Check(); err != nil {
		v.bad("partition_prefix", "%v", err)
	}
	for _, src := range r.PartitionSubjects {
		subject, n, err := route.SplitPartitionSource(src, r.Partitions)
		if err == nil {
			_, err = route.PartitionMapping(r.PartitionPrefix, n, subject)
		}
		if err != nil {
			v.bad("partition_subjects", "%v", err)
		}
	}
	if r.Ownership == "kv" {
		if r.EngineID == "" || strings.ContainsAny(r.EngineID, " \t\r\n") {
			v.bad("engine_id", "%q: ownership from a bucket names each engine: give a unique id without spaces", r.EngineID)
		}
		if r.Replicated {
			v.bad("ownership", "kv is not with replicated: there the consumers' pins decide who takes a partition")
		}
		v.atLeast("ownership_replicas", r.OwnershipReplicas, 1)
		if r.OwnershipBucket == "" || strings.ContainsAny(r.OwnershipBucket, ". *>") {
			v.bad("ownership_bucket", "%q: a key-value bucket name, without '.', '*', '>' or spaces", r.OwnershipBucket)
		}
	}
	if r.Replicated {
		v.atLeast("stream_replicas", r.StreamReplicas, 1)
		v.positive("stream_max_age", r.StreamMaxAge)
		v.positive("pinned_ttl", r.PinnedTTL)
		if r.ReplicatedConsumer == "" || strings.ContainsAny(r.ReplicatedConsumer, ". *>\t\r\n") {
			v.bad("replicated_consumer", "%q: a JetStream consumer name, without '.', '*', '>' or spaces", r.ReplicatedConsumer)
		}
		if strings.ContainsAny(r.EngineID, "/ \t\r\n") {
			v.bad("engine_id", "%q: the engines of a replicated partition tell each other their names: give one without '/' or spaces", r.EngineID)
		}
		if r.StreamPrefix == "" || strings.ContainsAny(r.StreamPrefix, ". *>\t\r\n") {
			v.bad("stream_prefix", "%q: a JetStream stream name prefix, without '.', '*', '>' or spaces", r.StreamPrefix)
		}
	}
	if len(r.PartitionSubjects) > 0 && r.Server != "" {
		v.bad("partition_subjects", "mappings of the embedded server: with an external one (--server), give them to every server (engine partition-map prints them)")
	}
}

// partitionsOf is the ingress configuration of the partition settings (nil when off); validate
// has checked them.
func (r *runCmd) partitionsOf() *route.Partitions {
	if r.Partitions == 0 {
		return nil
	}
	owned, _ := parseOwned(r.OwnedPartitions, r.Partitions)
	return &route.Partitions{Prefix: r.PartitionPrefix, Count: r.Partitions, Owned: owned}
}

// partitionMapCmd prints the mappings of partitioned ingest as a nats-server configuration block.
type partitionMapCmd struct {
	Partitions int       `help:"The partition count P of every topic (chosen once: it decides which partition a key is in)." default:"64"`
	Prefix     string    `name:"partition-prefix" help:"The partitions' namespace: a message of partition p is published to <prefix>.<p>.<its subject>." default:"rmq.p"`
	Subjects   []string  `arg:"" help:"Subjects to partition, each with one or more '*' tokens: the key (for example orders.* or orders.*.>); subject=N gives that subject's topic N partitions, fewer than --partitions."`
	out        io.Writer // os.Stdout when nil (tests)
}

func (c *partitionMapCmd) Run() error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Partitioned ingest: %d partitions under %s (engine partition-map).\n", c.Partitions, c.Prefix)
	b.WriteString("# Every nats-server that accepts publishers must carry exactly these mappings (in the\n")
	b.WriteString("# publishers' account; here the default one): a message is mapped where it enters NATS.\n")
	b.WriteString("mappings {\n")
	for _, src := range c.Subjects {
		subject, n, err := route.SplitPartitionSource(src, c.Partitions)
		if err != nil {
			return &configError{err}
		}
		dest, err := route.PartitionMapping(c.Prefix, n, subject)
		if err != nil {
			return &configError{err}
		}
		fmt.Fprintf(&b, "  %q: %q\n", subject, dest)
	}
	b.WriteString("}\n")
	out := c.out
	if out == nil {
		out = os.Stdout
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// partitionMoveCmd moves a partition between engines that take their ownership from the bucket
// (engine run --ownership kv).
type partitionMoveCmd struct {
	Partition int           `help:"The partition to move." required:""`
	To        string        `help:"The engine id (--engine-id) that takes it." required:""`
	NATS      string        `name:"nats" aliases:"server" short:"s" help:"A NATS server of the cluster ($NATS_URL when not given)." env:"NATS_URL" placeholder:"URL"`
	Creds     string        `help:"NATS user credentials file." env:"NATS_CREDS" type:"path" placeholder:"FILE"`
	Bucket    string        `help:"The ownership bucket." default:"RMQ_PARTITIONS"`
	Timeout   time.Duration `help:"How long the move may take (the old owner makes what it took durable first)." default:"1m"`
	out       io.Writer     // os.Stdout when nil (tests)
}

func (c *partitionMoveCmd) Run() error {
	if c.NATS == "" || c.Partition < 0 || c.To == "" {
		return &configError{errors.New("partition-move needs --nats (or $NATS_URL), --partition and --to")}
	}
	opts := []nats.Option{nats.Name("rocketstore engine partition-move")}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	nc, err := nats.Connect(c.NATS, opts...)
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s: %w", c.NATS, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, c.Bucket)
	if err != nil {
		return fmt.Errorf("ownership bucket %s: %w (are the engines running with --ownership kv?)", c.Bucket, err)
	}
	ends, err := natsserver.MovePartition(ctx, kv, c.Partition, c.To)
	if err != nil {
		return err
	}
	out := c.out
	if out == nil {
		out = os.Stdout
	}
	_, err = fmt.Fprintf(out, "partition %d is now %s's; its queues continue at %v\n", c.Partition, c.To, ends)
	return err
}
