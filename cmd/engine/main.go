// Command engine stores what flows through NATS subjects in Apache RocketMQ's store format.
//
//	engine run        run the engine (the default command): an embedded nats-server on
//	                  127.0.0.1:4222 and a store under ./store, unless told otherwise
//	engine version    print the version
//	engine get|query|msg|offsets|topics
//	                  read a store back: offline from its directory (--store, read-only,
//	                  also while an engine writes it) or online from a running engine (--nats)
//	engine replay     have a running engine publish a topic onto a subject
//	engine consume    read a topic as a member of a consumer group, to stdout
//	engine groups     list, describe, reset and delete consumer groups
//
// Exit codes: 0 success, 1 runtime error, 2 usage or configuration error.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// cli is the command line. kong (chosen over stdlib flag for subcommands with their own flags,
// environment variables and generated help) parses it.
type cli struct {
	LogLevel  string `help:"Log level: ${enum}." enum:"trace,debug,info,warn,error" default:"info" env:"ENGINE_LOG_LEVEL"`
	LogFormat string `help:"Log format: json, console, or auto (console on a terminal, JSON otherwise)." enum:"auto,json,console" default:"auto" env:"ENGINE_LOG_FORMAT"`
	GCPercent int    `name:"gc-percent" help:"The Go collector's target (as GOGC; the GOGC variable, when set, wins; 0 leaves Go's 100): the heap may grow to (1 + N/100) times what is live. The default trades memory for CPU (see docs/CONFIG.md)." default:"400" env:"ENGINE_GC_PERCENT"`

	Run     runCmd     `cmd:"" default:"withargs" help:"Run the engine: store NATS subjects durably (the default command)."`
	Version versionCmd `cmd:"" help:"Print the version."`
	Bench   benchCmd   `cmd:"" help:"Measure ingest throughput against the ceilings in the same run (see benchmarks/README.md)."`
	Verify  verifyCmd  `cmd:"" help:"Check a whole store read-only (exit 0: consistent, 1: problems, 2: usage); --repair repairs it."`
	Repair  repairCmd  `cmd:"" help:"Repair a store (the same as verify --repair): refused while an engine runs."`

	Get     getCmd     `cmd:"" help:"Print messages of a queue from an offset (--store DIR offline, or --nats URL online)."`
	Query   queryCmd   `cmd:"" help:"Print the messages of a topic with a key, in a time range, newest first."`
	Msg     msgCmd     `cmd:"" help:"Print one message by its offset message id (an ack's msgId)."`
	Offsets offsetsCmd `cmd:"" help:"Print the min/max offsets and store times of a topic's queues, or their offsets for a time."`
	Topics  topicsCmd  `cmd:"" help:"Print the topics and their queues."`
	Replay  replayCmd  `cmd:"" help:"Have a running engine publish a topic's messages onto a subject, acked or paced."`
	Consume consumeCmd `cmd:"" help:"Read a topic as a member of a consumer group: messages to stdout, committed as written (docs/GROUPS.md)."`
	Groups  groupsCmd  `cmd:"" help:"List, describe, reset and delete consumer groups of a running engine (docs/GROUPS.md)."`

	PartitionMap  partitionMapCmd  `cmd:"" name:"partition-map" help:"Print the nats-server mappings of partitioned ingest (docs/SCALE-OUT.md)."`
	PartitionMove partitionMoveCmd `cmd:"" name:"partition-move" help:"Move a partition to another engine (engines run with --ownership kv; docs/SCALE-OUT.md)."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	fmt.Println("engine", version)
	return nil
}

// newParser is the command line's parser (also used again by run's SIGHUP reload).
func newParser(c *cli) (*kong.Kong, error) {
	return kong.New(c,
		kong.Name("engine"),
		kong.Description("A storage engine for NATS: subjects kept on disk in Apache RocketMQ's store format."),
		kong.Exit(kongExit),
	)
}

func main() {
	var c cli
	parser, err := newParser(&c)
	if err != nil {
		panic(err)
	}
	ctx, err := parser.Parse(os.Args[1:])
	var cerr *configError
	if errors.As(err, &cerr) {
		// A configuration file's error: said plainly, without the usage.
		fmt.Fprintf(os.Stderr, "engine: %v\n", cerr)
		os.Exit(2)
	}
	if err != nil {
		usageFailed(os.Stderr, err, os.Args[1:])
	}
	tuneGC(c.GCPercent)
	log, levels := newLogger(c.LogLevel, c.LogFormat)
	if err := ctx.Run(log, levels); err != nil {
		if errors.As(err, &cerr) {
			fmt.Fprintf(os.Stderr, "engine: %v\n", cerr)
			os.Exit(2)
		}
		log.Error().Err(err).Msg("engine failed")
		os.Exit(1)
	}
}

// usageFailed reports a usage error and exits 2: the reason first, then the command that shows
// the help (kong's UsageOnError printed some fifty lines of help, on stdout, above the reason).
func usageFailed(w io.Writer, err error, args []string) {
	fmt.Fprintf(w, "engine: error: %v\n", err)
	fmt.Fprintf(w, "Run %q for help.\n", helpCommand(err, args))
	os.Exit(readUsageExit)
}

// helpCommand is the command line that shows the help of the command err is about ("engine get
// --help"), or the engine's ("engine --help", which lists the commands) when args did not name
// one (run, the default command, took them).
func helpCommand(err error, args []string) string {
	var names []string
	if pe, ok := errors.AsType[*kong.ParseError](err); ok && pe.Context != nil {
		for n := pe.Context.Selected(); n != nil; n = n.Parent {
			if n.Type == kong.CommandNode {
				names = append([]string{n.Name}, names...)
			}
		}
	}
	if len(names) > 0 && !slices.Contains(args, names[0]) {
		names = nil
	}
	return strings.Join(append(append([]string{"engine"}, names...), "--help"), " ")
}

// applyMemoryLimit makes limit bytes the process's soft memory limit (debug.SetMemoryLimit),
// unless the GOMEMLIMIT environment variable chose one (Go's own setting wins, as Go users
// expect) or limit is 0 (no limit). It returns the limit in force (math.MaxInt64: none).
func applyMemoryLimit(limit int64) int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set || limit <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// tuneGC sets the collector's target to percent, unless the GOGC environment variable chose
// one (Go's own setting wins, as Go users expect) or percent is 0.
//
// Why not Go's 100: the engine's live heap is small and bounded (the stages' queues, the
// dedupe window; about 60 MB at the issue-8 bench load) while it allocates per message, and
// the collector's work is proportional to what is allocated times 100/GOGC. At 400 the heap
// goal is five times the live heap (about 330 MB there), and the collector takes a quarter of
// the CPU it takes at 100. Every process of `engine bench` is this binary, so the references
// it measures (JetStream, the ceilings) run with the same setting.
func tuneGC(percent int) {
	if _, set := os.LookupEnv("GOGC"); set || percent <= 0 {
		return
	}
	debug.SetGCPercent(percent)
}
