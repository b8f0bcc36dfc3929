package main

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// Output of the read commands: tables (text/tabwriter) for people, or NDJSON (one object per
// line, HTML characters unescaped) for programs. Messages are printed as the read API sends
// them (api.Message): storeTimestamp in ms, the body in standard base64.

// Widths of the previews in message tables.
const (
	propsPreviewRunes = 64
	bodyPreviewRunes  = 40
)

// tableTime is how tables show a store time: RFC 3339 with milliseconds, local time.
const tableTime = "2006-01-02T15:04:05.000Z07:00"

// jsonLines writes values as NDJSON.
type jsonLines struct{ enc *json.Encoder }

func newJSONLines(w io.Writer) jsonLines {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return jsonLines{enc: enc}
}

func (j jsonLines) put(v any) error { return j.enc.Encode(v) }

// newTable is a tabwriter for a table whose columns are separated by two spaces.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// showTime formats a time in ms for a table; "-" for 0 (unknown).
func showTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(tableTime)
}

// messageTable prints messages as a table, one line each, with previews of their properties
// and bodies.
func messageTable(w io.Writer, msgs []api.Message) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tQUEUE\tOFFSET\tMSGID\tSTORED\tPROPERTIES\tBODY")
	for i := range msgs {
		m := &msgs[i]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", m.Topic, m.QueueID, m.QueueOffset, m.MsgID,
			showTime(m.StoreTimestamp), propsPreview(m.Properties), bodyPreview(m.Body, bodyPreviewRunes))
	}
	return tw.Flush()
}

// propsPreview is the properties as name=value: the message's own headers first, then those
// the store sets (TAGS, KEYS, UNIQ_KEY, NATS_SUBJECT...), each part sorted by name, without the
// whole-record CRC (store bookkeeping; msg and --json show it), cut to propsPreviewRunes.
func propsPreview(props map[string]string) string {
	var b strings.Builder
	names := slices.SortedFunc(maps.Keys(props), func(x, y string) int {
		if rx, ry := ingress.ReservedProperty(x), ingress.ReservedProperty(y); rx != ry {
			if rx {
				return 1
			}
			return -1
		}
		return strings.Compare(x, y)
	})
	for _, k := range names {
		if k == commitlog.PropCRC32 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(props[k])
	}
	return cut(printable(b.String()), propsPreviewRunes)
}

// bodyPreview is the start of a body as printable text: its text with control characters shown
// as '.', or for a body that is not UTF-8 its first bytes in hex; with its size when cut.
func bodyPreview(body []byte, runes int) string {
	if len(body) == 0 {
		return "(empty)"
	}
	if !utf8.Valid(body) {
		n := min(len(body), runes/2)
		s := hex.EncodeToString(body[:n])
		if n < len(body) {
			s += "…"
		}
		return fmt.Sprintf("(binary, %d bytes) %s", len(body), s)
	}
	s := printable(string(body))
	if utf8.RuneCountInString(s) <= runes {
		return s
	}
	return fmt.Sprintf("%s (%d bytes)", cut(s, runes), len(body))
}

// printable replaces what a terminal would not show as itself (control characters, other
// invisible runes) with '.'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || unicode.IsPrint(r) {
			return r
		}
		return '.'
	}, s)
}

// cut shortens s to n runes, marking the cut with '…'.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// messageDetail prints one message in full, a field per line: every property, and the whole
// body (as text when it is printable UTF-8, else in base64).
func messageDetail(w io.Writer, m *api.Message) error {
	tw := newTable(w)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	row("topic", m.Topic)
	row("queue", m.QueueID)
	row("queue offset", m.QueueOffset)
	row("msg id", m.MsgID)
	row("commitlog offset", m.CommitLogOffset)
	row("record size", m.Size)
	row("stored", fmt.Sprintf("%s (%d)", showTime(m.StoreTimestamp), m.StoreTimestamp))
	row("born", fmt.Sprintf("%s (%d)", showTime(m.BornTimestamp), m.BornTimestamp))
	row("store host", m.StoreHost)
	row("born host", m.BornHost)
	if m.Tags != "" {
		row("tags", m.Tags)
	}
	if m.Keys != "" {
		row("keys", m.Keys)
	}
	if m.UniqKey != "" {
		row("uniq key", m.UniqKey)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "properties:")
	for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
		fmt.Fprintf(w, "  %s=%s\n", printable(k), printable(m.Properties[k]))
	}
	switch {
	case len(m.Body) == 0:
		fmt.Fprintln(w, "body: (empty)")
	case utf8.Valid(m.Body) && isText(string(m.Body)):
		fmt.Fprintf(w, "body (%d bytes):\n%s", len(m.Body), m.Body)
		if m.Body[len(m.Body)-1] != '\n' {
			fmt.Fprintln(w)
		}
	default:
		fmt.Fprintf(w, "body (%d bytes, binary, base64):\n%s\n", len(m.Body), base64.StdEncoding.EncodeToString(m.Body))
	}
	return nil
}

// isText: printable runes and ordinary whitespace only.
func isText(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}
