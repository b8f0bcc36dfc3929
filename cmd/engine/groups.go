package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rocketstore/engine/engine/api"
)

// groupsCmd is `engine groups`: look at consumer groups, reset and delete their offsets, through
// a running engine's read API (docs/GROUPS.md). Online only: members and their assignment live
// in the running engine.
type groupsCmd struct {
	List     groupsListCmd     `cmd:"" help:"List consumer groups: members, lag in messages and in time."`
	Describe groupsDescribeCmd `cmd:"" help:"Describe a group: members, each queue's owner, epoch, committed offset and lag, recent rebalances."`
	Reset    groupsResetCmd    `cmd:"" help:"Set a group's offsets to an offset or a time (refused while it has members)."`
	Delete   groupsDeleteCmd   `cmd:"" help:"Delete a group's offsets (refused while it has members)."`
}

// groupsOnline is the source of every groups command: a running engine.
type groupsOnline struct {
	Online readNATSFlags `embed:""`
	JSON   bool          `name:"json" help:"Print JSON instead of a table."`
}

func (g *groupsOnline) Validate() error {
	if err := g.Online.resolve(); err != nil {
		return err
	}
	if g.Online.NATS == "" {
		return errors.New("groups needs a running engine: give --nats URL (or set $NATS_URL)")
	}
	return nil
}

type groupsListCmd struct {
	Src   groupsOnline `embed:""`
	Match string       `help:"Only groups whose name or topic contains this." placeholder:"TEXT"`
	After string       `help:"Start after this group (its topic@group key): the next page." placeholder:"KEY"`
	Max   int          `help:"Groups per page (at most 1000)." default:"100"`
}

func (c *groupsListCmd) name() string { return "groups list" }
func (c *groupsListCmd) Run() error   { return readMain(c) }

func (c *groupsListCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Src.Online.dial("groups")
	if err != nil {
		return err
	}
	defer src.close()
	rep, err := src.c.GroupList(ctx, api.GroupListRequest{After: c.After, Max: c.Max, Match: c.Match})
	if err != nil {
		return src.explain(err)
	}
	if c.Src.JSON {
		lines := newJSONLines(stdout)
		for _, g := range rep.Groups {
			if err := lines.put(g); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rep.Groups) == 0 {
		_, err := fmt.Fprintln(stdout, "no groups")
		return err
	}
	tw := newTable(stdout)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tMEMBERS\tLAG\tLAG TIME\tSTATE")
	for _, g := range rep.Groups {
		state := "stable"
		switch {
		case g.Members == 0:
			state = "no members"
		case g.Rebalancing:
			state = "rebalancing"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", g.Group, g.Topic, g.Members, g.LagMessages, lagTime(g.LagMs), state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Truncated {
		_, err = fmt.Fprintf(stdout, "more groups: --after %s\n", rep.Groups[len(rep.Groups)-1].Key)
	}
	return err
}

func lagTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
}

type groupsDescribeCmd struct {
	Src   groupsOnline `embed:""`
	Group string       `arg:"" help:"The group."`
	Topic string       `required:"" help:"The topic it reads." placeholder:"TOPIC"`
}

func (c *groupsDescribeCmd) name() string { return "groups describe" }
func (c *groupsDescribeCmd) Run() error   { return readMain(c) }

func (c *groupsDescribeCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Src.Online.dial("groups")
	if err != nil {
		return err
	}
	defer src.close()
	st, err := src.c.GroupDescribe(ctx, c.Group, c.Topic)
	if err != nil {
		if api.CodeOf(err) == api.CodeNotFound {
			return fmt.Errorf("no group %q on topic %q (no members, no committed offsets)", c.Group, c.Topic)
		}
		return src.explain(err)
	}
	if c.Src.JSON {
		return newJSONLines(stdout).put(st)
	}
	fmt.Fprintf(stdout, "group %s on topic %s", st.Group, st.Topic)
	if st.Subject != "" {
		fmt.Fprintf(stdout, " (subject %s)", st.Subject)
	}
	fmt.Fprintf(stdout, ": %d members, lag %d messages (%s), %d redelivered\n", len(st.Members), st.LagMessages, lagTime(st.LagMs), st.Redelivered)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "MEMBER\tCLIENT\tJOINED\tQUEUES")
	for _, m := range st.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, showTime(m.JoinedMs), queueList(m.Queues))
	}
	fmt.Fprintln(tw, "\nQUEUE\tOWNER\tEPOCH\tCOMMITTED\tMIN\tMAX\tLAG\tLAG TIME")
	for _, q := range st.Queues {
		owner := q.Owner
		if q.Revoking {
			owner += " (releasing to " + q.Next + ")"
		}
		committed := "-"
		if q.Committed >= 0 {
			committed = fmt.Sprint(q.Committed)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%d\t%d\t%s\n", q.QueueID, owner, q.Epoch, committed, q.MinOffset, q.MaxOffset, q.LagMessages, lagTime(q.LagMs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Rebalances) > 0 || st.Rebalancing != nil {
		tw = newTable(stdout)
		fmt.Fprintln(tw, "\nREBALANCE\tMEMBER\tSTARTED\tTOOK\tMOVED\tREDELIVERED")
		for _, r := range st.Rebalances {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", r.Reason, r.MemberID, showTime(r.StartMs),
				time.Duration(r.DurationMs)*time.Millisecond, r.Moved, r.Redelivered)
		}
		if r := st.Rebalancing; r != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\tunder way\t%d\t%d\n", r.Reason, r.MemberID, showTime(r.StartMs), r.Moved, r.Redelivered)
		}
		return tw.Flush()
	}
	return nil
}

type groupsResetCmd struct {
	Src    groupsOnline `embed:""`
	Group  string       `arg:"" help:"The group."`
	Topic  string       `required:"" help:"The topic it reads." placeholder:"TOPIC"`
	Offset int64        `placeholder:"N" help:"Set the offsets to this queue offset." xor:"to" required:""`
	Time   timeArg      `help:"Set each queue's offset to its first message stored at or after TIME (RFC 3339, Unix ms, now, or relative: --time=-1h)." placeholder:"TIME" xor:"to" required:""`
	Queue  []int32      `short:"q" placeholder:"ID" help:"Only these queues (comma-separated); default: every queue of the topic."`
}

func (c *groupsResetCmd) name() string { return "groups reset" }
func (c *groupsResetCmd) Run() error   { return readMain(c) }

func (c *groupsResetCmd) Validate() error {
	if c.Offset < 0 {
		return errors.New("--offset must be a queue offset (>= 0)")
	}
	return nil
}

func (c *groupsResetCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Src.Online.dial("groups")
	if err != nil {
		return err
	}
	defer src.close()
	req := api.GroupResetRequest{Group: c.Group, Topic: c.Topic, Queues: c.Queue}
	if c.Time.set {
		req.Timestamp = &c.Time.ms
	} else {
		req.Offset = &c.Offset
	}
	rep, err := src.c.GroupReset(ctx, req)
	if err != nil {
		return groupChangeErr(src, err)
	}
	if c.Src.JSON {
		return newJSONLines(stdout).put(rep)
	}
	parts := make([]string, len(rep.Queues))
	for i, q := range rep.Queues {
		parts[i] = fmt.Sprintf("%d=%d", q.QueueID, q.Offset)
	}
	_, err = fmt.Fprintf(stdout, "group %s on %s reset: %s\n", c.Group, c.Topic, strings.Join(parts, " "))
	return err
}

// groupChangeErr explains a refused reset or delete.
func groupChangeErr(src *onlineSource, err error) error {
	if api.CodeOf(err) == api.CodeConflict {
		return fmt.Errorf("%w (stop the group's members first: each commits and leaves)", err)
	}
	return src.explain(err)
}

type groupsDeleteCmd struct {
	Src   groupsOnline `embed:""`
	Group string       `arg:"" help:"The group."`
	Topic string       `required:"" help:"The topic it reads." placeholder:"TOPIC"`
}

func (c *groupsDeleteCmd) name() string { return "groups delete" }
func (c *groupsDeleteCmd) Run() error   { return readMain(c) }

func (c *groupsDeleteCmd) execute(ctx context.Context, stdout, _ io.Writer) error {
	src, err := c.Src.Online.dial("groups")
	if err != nil {
		return err
	}
	defer src.close()
	rep, err := src.c.GroupDelete(ctx, c.Group, c.Topic)
	if err != nil {
		return groupChangeErr(src, err)
	}
	if c.Src.JSON {
		return newJSONLines(stdout).put(rep)
	}
	if !rep.Deleted {
		return fmt.Errorf("no offsets of group %q on topic %q to delete", c.Group, c.Topic)
	}
	_, err = fmt.Fprintf(stdout, "group %s on %s deleted\n", c.Group, c.Topic)
	return err
}
