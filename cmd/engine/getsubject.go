package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rocketstore/engine/engine/api"
)

// `engine get --subject S` without --topic: a subject's history can span topics (the subject
// rule's topic before a pattern was declared for it, the declared topic after; _overflow while
// the topic limit was reached, its own topic after the limit was raised: docs/CONFIG.md, "Wide
// subject spaces"), so this reads S's messages in every queue of every topic and prints them in
// the order they were stored (CommitLog offset). Each queue is read with the subject filter from
// its first offset until it has given --count messages or reached its head: the first --count
// messages of the store are among those. It reads every queue, which on a large store takes as
// long as reading it; in a declared topic (under the subject-tag rule) a literal subject skips
// the other subjects' units without reading their records.

// executeEveryTopic is execute without --topic.
func (c *getCmd) executeEveryTopic(ctx context.Context, src readSource, stdout, stderr io.Writer) error {
	msgs, topics, err := c.readEveryTopic(ctx, src)
	if err != nil {
		return err
	}
	status := fmt.Sprintf("%d messages on subject %s", len(msgs), c.Subj)
	if len(topics) > 0 {
		status += fmt.Sprintf(" in topic(s) %s, in the order they were stored", strings.Join(topics, ", "))
	}
	status += " (every topic of " + src.where() + " was read)"
	if len(msgs) == c.Count {
		status += "; more may follow: raise --count, or read on in one topic from its queue offsets"
	}
	if c.JSON {
		lines := newJSONLines(stdout)
		for i := range msgs {
			if err := lines.put(&msgs[i]); err != nil {
				return err
			}
		}
		if isTTY(stderr) {
			fmt.Fprintln(stderr, status)
		}
		return nil
	}
	if len(msgs) > 0 {
		if err := messageTable(stdout, msgs); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, "no messages")
	}
	_, err = fmt.Fprintln(stdout, status)
	return err
}

// readEveryTopic reads the first Count messages on c.Subj in the store, by CommitLog offset, and
// names the topics they are in.
func (c *getCmd) readEveryTopic(ctx context.Context, src readSource) ([]api.Message, []string, error) {
	all, err := src.topics(ctx)
	if err != nil {
		return nil, nil, src.explain(err)
	}
	var msgs []api.Message
	for _, t := range all {
		for _, q := range t.Queues {
			one := *c
			one.Topic, one.Queue, one.Offset, one.Wait = t.Name, q, -1, 0
			out, err := one.read(ctx, src)
			if err != nil {
				return nil, nil, err
			}
			msgs = append(msgs, out.msgs...)
		}
	}
	slices.SortFunc(msgs, func(a, b api.Message) int { return cmp.Compare(a.CommitLogOffset, b.CommitLogOffset) })
	msgs = msgs[:min(len(msgs), c.Count)]
	var topics []string
	for _, m := range msgs {
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	return msgs, topics, nil
}
