package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
)

// Message search, every mode paged without a cap, every search a URL (the page's own URL holds
// the same parameters, so a search is a link to share):
//
//	GET /console/api/messages?topic=T&key=K[&begin=..&end=..&subject=S]  by key (KEYS or UNIQ_KEY), newest first
//	GET /console/api/messages?id=OFFSET_MSG_ID                             the message with that offset id
//	GET /console/api/messages?topic=T&id=NATS_MSG_ID                       by a publisher's Nats-Msg-Id (UNIQ_KEY)
//	GET /console/api/messages?topic=T[&begin=..][&end=..][&subject=S]      by time and subject, oldest first
//
// begin and end are RFC 3339 times or Unix ms; subject a subject or a pattern; cursor the
// previous page's next; limit the page size (50, at most 500).

// SummaryJSON is a message in a list.
type SummaryJSON struct {
	MsgID       string `json:"msg_id"`
	Topic       string `json:"topic"`
	QueueID     int32  `json:"queue_id"`
	QueueOffset int64  `json:"queue_offset"`
	Offset      int64  `json:"commitlog_offset"`
	StoreTime   int64  `json:"store_time"`
	BornTime    int64  `json:"born_time"`
	Subject     string `json:"subject,omitempty"`
	Keys        string `json:"keys,omitempty"`
	UniqKey     string `json:"uniq_key,omitempty"`
	Tags        string `json:"tags,omitempty"`
	Size        int32  `json:"size"`
	BodySize    int    `json:"body_size"`
	// Preview is the body's first characters, as text ("" for a body that is not UTF-8).
	Preview string `json:"preview"`
}

const previewLen = 120

func summary(m engine.ReadMessage) SummaryJSON {
	s := SummaryJSON{MsgID: m.MsgID, Topic: m.Topic, QueueID: m.QueueID, QueueOffset: m.QueueOffset, Offset: m.PhysicalOffset,
		StoreTime: m.StoreTimestamp, BornTime: m.BornTimestamp, Keys: m.Keys, UniqKey: m.UniqKey, Tags: m.Tags,
		Size: m.Size, BodySize: len(m.Body)}
	if v, ok := commitlog.Properties(m.RawProperties).Get(natssubject.Property); ok {
		s.Subject = string(v)
	}
	body := m.Body[:min(len(m.Body), previewLen*4)]
	for len(body) > 0 && !utf8.Valid(body) && len(m.Body) > len(body) { // cut inside a rune
		body = body[:len(body)-1]
	}
	if utf8.Valid(body) {
		r := []rune(string(body))
		s.Preview = string(r[:min(len(r), previewLen)])
	}
	return s
}

// parseTime reads a time parameter: Unix ms, or RFC 3339.
func parseTime(name, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q: want an RFC 3339 time (2026-05-01T10:00:00Z) or Unix ms", errBadParam, name, s)
	}
	return t.UnixMilli(), nil
}

// keyCursorString and parseKeyCursor put a key search's cursor in a URL: FILE.ENTRY.LAST.
func keyCursorString(c engine.KeyCursor) string {
	return fmt.Sprintf("%s.%d.%d", c.File, c.Entry, c.Last)
}

func parseKeyCursor(s string) (engine.KeyCursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || !indexfile.IsName(parts[0]) {
		return engine.KeyCursor{}, fmt.Errorf("%w: cursor %q is not a key search's", errBadParam, s)
	}
	entry, err1 := strconv.ParseInt(parts[1], 10, 32)
	last, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || entry < 0 {
		return engine.KeyCursor{}, fmt.Errorf("%w: cursor %q is not a key search's", errBadParam, s)
	}
	return reader.KeyCursor{KeyCursor: indexfile.KeyCursor{File: parts[0], Entry: int32(entry)}, Last: last}, nil
}

// messagesReply is a page of a search.
type messagesReply struct {
	// Mode is how the search went: key, uniq_key, msg_id or time.
	Mode     string        `json:"mode"`
	Messages []SummaryJSON `json:"messages"`
	// Next is the cursor of the next page, "" when there is none.
	Next string `json:"next,omitempty"`
}

// messages is GET /console/api/messages (see the top of this file).
func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	st, ok := c.store(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	topic, key, id, subject, cursor := q.Get("topic"), q.Get("key"), q.Get("id"), q.Get("subject"), q.Get("cursor")
	begin, err := parseTime("begin", q.Get("begin"))
	if err != nil {
		readError(w, err)
		return
	}
	end, err := parseTime("end", q.Get("end"))
	if err != nil {
		readError(w, err)
		return
	}
	if subject != "" {
		if why := natssubject.Check(subject, true); why != "" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("subject %q: %s", subject, why))
			return
		}
	}
	out := messagesReply{Messages: []SummaryJSON{}}
	limit := pageSize(r)
	if id != "" {
		if _, _, err := commitlog.ParseOffsetMsgID(id); err == nil {
			out.Mode = "msg_id"
			m, err := st.Lookup(id)
			if err != nil {
				readError(w, err)
				return
			}
			out.Messages = append(out.Messages, summary(m))
			reply(w, out)
			return
		}
		key = id // not an offset id: a publisher's Nats-Msg-Id, the UNIQ_KEY
	}
	if topic == "" {
		fail(w, http.StatusBadRequest, "a search needs a topic (only an offset message id is found without one)")
		return
	}
	if key != "" {
		out.Mode = "key"
		if id != "" {
			out.Mode = "uniq_key"
		}
		req := engine.KeySearchRequest{Topic: topic, Key: key, UniqOnly: id != "", Begin: begin, End: end, Subject: subject, Max: limit}
		if cursor != "" {
			if req.After, err = parseKeyCursor(cursor); err != nil {
				readError(w, err)
				return
			}
		}
		page, err := st.SearchKey(r.Context(), req)
		if err != nil {
			readError(w, err)
			return
		}
		for _, m := range page.Messages {
			out.Messages = append(out.Messages, summary(m))
		}
		if !page.Done {
			out.Next = keyCursorString(page.Next)
		}
		reply(w, out)
		return
	}
	out.Mode = "time"
	req := timeSearch{Topic: topic, Subject: subject, Begin: begin, End: end, Limit: limit}
	if cursor != "" {
		if req.After, err = parseQueueCursor(cursor); err != nil {
			readError(w, err)
			return
		}
	}
	page, err := searchTime(r.Context(), st, req)
	if err != nil {
		readError(w, err)
		return
	}
	for _, m := range page.Messages {
		out.Messages = append(out.Messages, summary(m))
	}
	if page.Next != nil {
		out.Next = page.Next.String()
	}
	reply(w, out)
}
