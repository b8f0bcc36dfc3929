package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/reader"
)

// getCmd is `engine get`: messages of one queue from an offset.
type getCmd struct {
	Source readSourceFlags `embed:""`

	Topic  string        `placeholder:"TOPIC" help:"Topic to read (a subject's topic: orders.eu is stored as orders_eu). Without it, --subject S reads S's messages in every topic (a subject's history can span topics: docs/CONFIG.md)."`
	Queue  int32         `aliases:"queue-id" short:"q" placeholder:"ID" help:"Queue id (required with --topic)." default:"-1"`
	Offset int64         `placeholder:"N" help:"Queue offset of the first message; -1 (the default): the queue's first offset." default:"-1"`
	Count  int           `short:"n" placeholder:"K" help:"Messages to print at most, read in as many requests as it takes (default 32)." default:"32"`
	Tags   []string      `help:"Only messages whose TAGS is one of these, comma-separated."`
	Subj   string        `name:"subject" placeholder:"SUBJECT" help:"Only messages whose NATS subject matches this subject or pattern (device.*.temp, orders.>)."`
	Wait   time.Duration `help:"At the head of the queue, wait up to this long for a message (at most 1m; offline, the store is looked at again every 100ms)."`
	JSON   bool          `name:"json" help:"Print one JSON object per message (NDJSON) instead of a table."`
}

func (c *getCmd) name() string { return "get" }
func (c *getCmd) Run() error   { return readMain(c) }

func (c *getCmd) Validate() error {
	switch {
	case c.Topic == "" && c.Subj == "":
		return errors.New("missing flags: --topic=TOPIC and --queue=ID (or --subject=SUBJECT alone, to read a subject in every topic)")
	case c.Topic != "" && c.Queue < 0:
		return errors.New("missing flags: --queue=ID (a queue of --topic)")
	case c.Topic == "" && (c.Queue >= 0 || c.Offset >= 0 || c.Wait > 0):
		return errors.New("--queue, --offset and --wait read one queue: they need --topic")
	case c.Count <= 0:
		return errors.New("--count must be at least 1")
	case c.Offset < -1:
		return errors.New("--offset must be a queue offset (>= 0), or -1 for the queue's first")
	case c.Wait < 0 || c.Wait > api.MaxWaitMs*time.Millisecond:
		return fmt.Errorf("--wait must be between 0 and %v", api.MaxWaitMs*time.Millisecond)
	}
	if why := natssubject.Check(c.Subj, true); c.Subj != "" && why != "" {
		return fmt.Errorf("--subject %q is not a NATS subject or pattern: %s", c.Subj, why)
	}
	return nil
}

// getOutcome is what a get read: the messages, and the last read's status and bounds.
type getOutcome struct {
	msgs                 []api.Message
	status               string
	next, minOff, maxOff int64
}

func (c *getCmd) execute(ctx context.Context, stdout, stderr io.Writer) error {
	src, err := c.Source.open("get")
	if err != nil {
		return err
	}
	defer src.close()
	if c.Topic == "" {
		return c.executeEveryTopic(ctx, src, stdout, stderr)
	}
	out, err := c.read(ctx, src)
	if err != nil {
		return err
	}
	if c.JSON {
		lines := newJSONLines(stdout)
		for i := range out.msgs {
			if err := lines.put(&out.msgs[i]); err != nil {
				return err
			}
		}
		if isTTY(stderr) {
			fmt.Fprintln(stderr, c.statusLine(out))
		}
		return nil
	}
	if len(out.msgs) > 0 {
		if err := messageTable(stdout, out.msgs); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, "no messages")
	}
	_, err = fmt.Fprintln(stdout, c.statusLine(out))
	return err
}

// read gets up to Count messages, request after request, from Offset (or the queue's first)
// until the count is reached, the head of the queue is, or a read finds nothing more. Only a
// read that has found nothing yet waits.
func (c *getCmd) read(ctx context.Context, src readSource) (getOutcome, error) {
	var out getOutcome
	off := max(c.Offset, 0)
	for len(out.msgs) < c.Count {
		req := api.GetRequest{Topic: c.Topic, QueueID: c.Queue, Offset: off, Tags: c.Tags, Subject: c.Subj,
			Max: min(c.Count-len(out.msgs), reader.MaxGetMax)}
		if len(out.msgs) == 0 {
			req.WaitMs = c.Wait.Milliseconds()
		}
		rep, err := src.get(ctx, req)
		if isUnknownQueue(err) {
			return out, unknownQueue(ctx, src, c.Topic, c.Queue)
		}
		if err != nil {
			return out, src.explain(err)
		}
		switch rep.Status {
		case api.StatusOffsetTooSmall:
			if c.Offset < 0 && rep.NextOffset > off { // from the first: start at the queue's min
				off = rep.NextOffset
				continue
			}
			if len(out.msgs) == 0 {
				return out, c.outOfRange(off, rep)
			}
		case api.StatusOffsetOverflowBadly:
			if len(out.msgs) == 0 {
				return out, c.outOfRange(off, rep)
			}
		}
		out.msgs = append(out.msgs, rep.Messages...)
		out.status, out.next, out.minOff, out.maxOff = rep.Status, rep.NextOffset, rep.MinOffset, rep.MaxOffset
		if rep.NextOffset <= off || rep.NextOffset >= rep.MaxOffset {
			break // the head, or nothing more to read
		}
		if rep.Status != api.StatusFound && rep.Status != api.StatusNoMatchedMessage && rep.Status != api.StatusOffsetFoundNull {
			break
		}
		off = rep.NextOffset
	}
	if len(out.msgs) > 0 {
		out.status = api.StatusFound
	}
	return out, nil
}

// outOfRange says which offsets the queue has.
func (c *getCmd) outOfRange(off int64, rep *api.GetReply) error {
	q := fmt.Sprintf("%s/%d", c.Topic, c.Queue)
	if rep.MinOffset >= rep.MaxOffset {
		return fmt.Errorf("offset %d is out of range: queue %s holds no messages now (its next message will get offset %d)",
			off, q, rep.MaxOffset)
	}
	return fmt.Errorf("offset %d is out of range: queue %s holds offsets %d to %d (%d is its head, where the next message will be)",
		off, q, rep.MinOffset, rep.MaxOffset-1, rep.MaxOffset)
}

// statusLine tells how the read ended and where to read next.
func (c *getCmd) statusLine(out getOutcome) string {
	s := fmt.Sprintf("status %s, next offset %d", out.status, out.next)
	if out.minOff < out.maxOff {
		s += fmt.Sprintf(" (queue %s/%d holds offsets %d to %d)", c.Topic, c.Queue, out.minOff, out.maxOff-1)
	}
	switch out.status {
	case api.StatusOffsetOverflowOne:
		s += ": at the head of the queue, nothing newer yet"
	case api.StatusNoMessageInQueue:
		s += ": the queue has never held a message"
	case api.StatusNoMatchedMessage:
		s += ": no message " + c.filterText()
	case api.StatusOffsetFoundNull:
		s += ": the messages there were deleted by retention"
	}
	return s
}

// queryCmd is `engine query`: messages of a topic by key, newest first.
type queryCmd struct {
	Source readSourceFlags `embed:""`

	Topic string  `placeholder:"TOPIC" help:"Topic to search." required:""`
	Key   string  `placeholder:"KEY" help:"Key: a message's UNIQ_KEY (its Nats-Msg-Id) or one of its KEYS (Rmq-Keys)." required:""`
	Begin timeArg `help:"Only messages stored at or after TIME: RFC 3339, Unix ms, now, or relative (--begin=-1h)." placeholder:"TIME"`
	End   timeArg `help:"Only messages stored at or before TIME (same forms as --begin)." placeholder:"TIME"`
	Max   int     `placeholder:"N" help:"Messages at most, 1 to 64 (default 64)." default:"64"`
	JSON  bool    `name:"json" help:"Print one JSON object per message (NDJSON) instead of a table."`
}

func (c *queryCmd) name() string { return "query" }
func (c *queryCmd) Run() error   { return readMain(c) }

func (c *queryCmd) Validate() error {
	switch {
	case c.Max < 1 || c.Max > reader.MaxQueryMessages:
		return fmt.Errorf("--max must be between 1 and %d", reader.MaxQueryMessages)
	case c.Begin.set && c.End.set && c.End.ms < c.Begin.ms:
		return errors.New("--end is before --begin")
	case c.End.set && c.End.ms <= 0:
		return errors.New("--end must be after 1970-01-01T00:00:00Z")
	}
	return nil
}

func (c *queryCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Source.open("query")
	if err != nil {
		return err
	}
	defer src.close()
	rep, err := src.query(ctx, api.QueryRequest{Topic: c.Topic, Key: c.Key, Begin: max(c.Begin.ms, 0), End: c.End.ms, Max: c.Max})
	if err != nil {
		return src.explain(err)
	}
	if len(rep.Messages) == 0 {
		// Nothing found: say so if it is because the topic is not there at all.
		if _, err := src.offsets(ctx, c.Topic); isUnknownQueue(err) {
			return unknownTopic(ctx, src, c.Topic)
		}
	}
	if c.JSON {
		lines := newJSONLines(stdout)
		for i := range rep.Messages {
			if err := lines.put(&rep.Messages[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rep.Messages) == 0 {
		_, err := fmt.Fprintf(stdout, "no message of topic %s has the key %q in that time range\n", c.Topic, c.Key)
		return err
	}
	if err := messageTable(stdout, rep.Messages); err != nil {
		return err
	}
	if rep.Truncated || len(rep.Messages) >= c.Max {
		oldest := rep.Messages[len(rep.Messages)-1].StoreTimestamp
		fmt.Fprintf(stdout, "%d messages, newest first; older ones may match: ask again with --end=%d\n", len(rep.Messages), oldest)
	}
	return nil
}

// msgCmd is `engine msg`: one message by its offset message id.
type msgCmd struct {
	Source readSourceFlags `embed:""`

	MsgID string `arg:"" name:"msgid" help:"Offset message id (the msgId of an ack, 32 hex digits)."`
	JSON  bool   `name:"json" help:"Print the message as one JSON object (body in base64)."`
}

func (c *msgCmd) name() string    { return "msg" }
func (c *msgCmd) Run() error      { return readMain(c) }
func (c *msgCmd) Validate() error { return validMsgID(c.MsgID) }

func (c *msgCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Source.open("msg")
	if err != nil {
		return err
	}
	defer src.close()
	m, err := src.msg(ctx, c.MsgID)
	switch {
	case errors.Is(err, reader.ErrNotFound) || api.CodeOf(err) == api.CodeNotFound:
		return fmt.Errorf("message %s not found in this store (%s): never stored, or deleted by retention", c.MsgID, src.where())
	case errors.Is(err, reader.ErrBadMsgID) || api.CodeOf(err) == api.CodeBadRequest:
		return readUsageError{fmt.Errorf("%w (%v)", validMsgID(c.MsgID), err)}
	case err != nil:
		return src.explain(err)
	}
	if c.JSON {
		return newJSONLines(stdout).put(&m)
	}
	return messageDetail(stdout, &m)
}

// offsetsCmd is `engine offsets`: the bounds of a topic's queues, or their offsets for a time.
type offsetsCmd struct {
	Source readSourceFlags `embed:""`

	Topic string  `placeholder:"TOPIC" help:"Topic." required:""`
	Queue []int32 `aliases:"queue-id" short:"q" placeholder:"ID" help:"Only these queues (comma-separated); default: every queue of the topic."`
	Time  timeArg `help:"Print the offset of each queue for TIME instead: its first message stored at or after it (RFC 3339, Unix ms, now, or relative: --time=-1h)." placeholder:"TIME"`
	JSON  bool    `name:"json" help:"Print one JSON object per queue (NDJSON) instead of a table."`
}

func (c *offsetsCmd) name() string { return "offsets" }
func (c *offsetsCmd) Run() error   { return readMain(c) }

// queueBounds is a line of `offsets --json`.
type queueBounds struct {
	Topic string `json:"topic"`
	api.QueueOffsets
}

// queueTimeOffset is a line of `offsets --time --json`.
type queueTimeOffset struct {
	Topic     string `json:"topic"`
	QueueID   int32  `json:"queueId"`
	Timestamp int64  `json:"timestamp"`
	Offset    int64  `json:"offset"`
	MinOffset int64  `json:"minOffset"`
	MaxOffset int64  `json:"maxOffset"`
}

func (c *offsetsCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Source.open("offsets")
	if err != nil {
		return err
	}
	defer src.close()
	all, err := src.offsets(ctx, c.Topic)
	if isUnknownQueue(err) {
		return unknownTopic(ctx, src, c.Topic)
	}
	if err != nil {
		return src.explain(err)
	}
	qs := all
	if len(c.Queue) > 0 {
		qs = nil
		for _, id := range c.Queue {
			i := indexOfQueue(all, id)
			if i < 0 {
				return unknownQueue(ctx, src, c.Topic, id)
			}
			qs = append(qs, all[i])
		}
	}
	if c.Time.set {
		return c.printForTime(ctx, src, stdout, qs)
	}
	if c.JSON {
		lines := newJSONLines(stdout)
		for _, q := range qs {
			if err := lines.put(queueBounds{Topic: c.Topic, QueueOffsets: q}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "QUEUE\tMIN\tMAX\tMESSAGES\tFIRST STORED\tLAST STORED")
	for _, q := range qs {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\n", q.QueueID, q.MinOffset, q.MaxOffset, q.MaxOffset-q.MinOffset,
			showTime(q.MinStoreTime), showTime(q.MaxStoreTime))
	}
	return tw.Flush()
}

func (c *offsetsCmd) printForTime(ctx context.Context, src readSource, stdout io.Writer, qs []api.QueueOffsets) error {
	lines := newJSONLines(stdout)
	tw := newTable(stdout)
	if !c.JSON {
		fmt.Fprintf(stdout, "first offset stored at or after %s:\n", showTime(c.Time.ms))
		fmt.Fprintln(tw, "QUEUE\tOFFSET\tMIN\tMAX")
	}
	for _, q := range qs {
		off, err := src.offsetForTime(ctx, c.Topic, q.QueueID, c.Time.ms)
		if err != nil {
			return src.explain(err)
		}
		if c.JSON {
			if err := lines.put(queueTimeOffset{Topic: c.Topic, QueueID: q.QueueID, Timestamp: c.Time.ms,
				Offset: off, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\n", q.QueueID, off, q.MinOffset, q.MaxOffset)
	}
	if c.JSON {
		return nil
	}
	return tw.Flush()
}

func indexOfQueue(qs []api.QueueOffsets, id int32) int {
	for i, q := range qs {
		if q.QueueID == id {
			return i
		}
	}
	return -1
}

// topicsCmd is `engine topics`: the topics of the store and their queues.
type topicsCmd struct {
	Source readSourceFlags `embed:""`

	JSON bool `name:"json" help:"Print one JSON object per topic (NDJSON) instead of a table."`
}

func (c *topicsCmd) name() string { return "topics" }
func (c *topicsCmd) Run() error   { return readMain(c) }

// topicLine is a line of `topics --json`.
type topicLine struct {
	Topic  string  `json:"topic"`
	Queues []int32 `json:"queues"`
}

func (c *topicsCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Source.open("topics")
	if err != nil {
		return err
	}
	defer src.close()
	ts, err := src.topics(ctx)
	if err != nil {
		return src.explain(err)
	}
	if c.JSON {
		lines := newJSONLines(stdout)
		for _, t := range ts {
			if err := lines.put(topicLine{Topic: t.Name, Queues: t.Queues}); err != nil {
				return err
			}
		}
		return nil
	}
	if len(ts) == 0 {
		_, err := fmt.Fprintln(stdout, "no topics")
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "TOPIC\tQUEUES")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, queueList(t.Queues))
	}
	return tw.Flush()
}

// isTTY says w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// filterText says what the filters asked for, for "no matched message".
func (c *getCmd) filterText() string {
	var f []string
	if len(c.Tags) > 0 {
		f = append(f, "tagged "+strings.Join(c.Tags, " or "))
	}
	if c.Subj != "" {
		f = append(f, "on subject "+c.Subj)
	}
	return strings.Join(f, " and ")
}
