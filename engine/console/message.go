package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/stages/ingress"
)

// One message: its fields, its properties, its body (as text, as JSON, as bytes), and a `nats
// pub` command that publishes it again.

// maxBodyShown is how much of a body the message page carries; /console/api/message/body gives
// all of it.
const maxBodyShown = 1 << 20

// MessageJSON is a message's page.
type MessageJSON struct {
	SummaryJSON
	BornHost       string      `json:"born_host"`
	StoreHost      string      `json:"store_host"`
	SysFlag        int32       `json:"sys_flag"`
	ReconsumeTimes int32       `json:"reconsume_times"`
	Properties     [][2]string `json:"properties"`
	// Body is base64, cut at maxBodyShown (Truncated); Text is set when it is UTF-8, JSON when
	// it parses as JSON (indented).
	Body      string  `json:"body"`
	Truncated bool    `json:"truncated"`
	Text      *string `json:"text,omitempty"`
	JSON      *string `json:"json,omitempty"`
	// NatsPub publishes the message again with the NATS CLI.
	NatsPub string `json:"nats_pub"`
}

// message is GET /console/api/message?id=OFFSET_MSG_ID.
func (c *Console) message(w http.ResponseWriter, r *http.Request) {
	st, ok := c.store(w)
	if !ok {
		return
	}
	m, err := st.Lookup(r.URL.Query().Get("id"))
	if err != nil {
		readError(w, err)
		return
	}
	rt, _ := c.routing()
	out := MessageJSON{SummaryJSON: summary(m), BornHost: m.BornHost.String(), StoreHost: m.StoreHost.String(),
		SysFlag: m.SysFlag, ReconsumeTimes: m.ReconsumeTimes, Properties: [][2]string{}}
	for k, v := range commitlog.Properties(m.RawProperties).All() {
		out.Properties = append(out.Properties, [2]string{string(k), string(v)})
	}
	body := m.Body
	if len(body) > maxBodyShown {
		body, out.Truncated = body[:maxBodyShown], true
	}
	out.Body = base64.StdEncoding.EncodeToString(body)
	if utf8.Valid(body) {
		s := string(body)
		out.Text = &s
		var ind bytes.Buffer
		if json.Valid(body) && json.Indent(&ind, body, "", "  ") == nil {
			j := ind.String()
			out.JSON = &j
		}
	}
	out.NatsPub = natsPub(m, out.Subject, rt)
	reply(w, out)
}

// messageBody is GET /console/api/message/body?id=OFFSET_MSG_ID: the whole body, as a download.
func (c *Console) messageBody(w http.ResponseWriter, r *http.Request) {
	st, ok := c.store(w)
	if !ok {
		return
	}
	m, err := st.Lookup(r.URL.Query().Get("id"))
	if err != nil {
		readError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+m.MsgID+`.bin"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(m.Body)))
	_, _ = w.Write(m.Body)
}

// natsPub is a shell command that publishes m again on subject with its headers: every property
// that came from a header (the others the store sets), the keys as the keys header, the tags as
// the tags header when they came from one. The Nats-Msg-Id is left out: the same id again within
// the dedupe window would be answered as a duplicate and not stored. A body that is not plain
// text, or holds "{{" (nats pub reads its body argument as a template), goes through stdin.
func natsPub(m engine.ReadMessage, subject string, rt engine.Routing) string {
	if subject == "" {
		subject = m.Topic // a record without NATS_SUBJECT (written by RocketMQ): its topic
	}
	var args []string
	header := func(name, value string) { args = append(args, "-H", shellQuote(name+":"+value)) }
	if m.Keys != "" {
		header(orDefault(rt.KeysHeader, "Rmq-Keys"), m.Keys)
	}
	if m.Tags != "" && m.Tags != subject && rt.TopicTokens == 0 {
		header(orDefault(rt.TagsHeader, "Rmq-Tags"), m.Tags)
	}
	for k, v := range commitlog.Properties(m.RawProperties).All() {
		name := string(k)
		if ingress.ReservedProperty(name) {
			continue
		}
		if i := strings.LastIndexByte(name, '#'); i > 0 && allDigits(name[i+1:]) {
			name = name[:i] // a further value of the header: name#2, name#3...
		}
		header(name, string(v))
	}
	cmd := "nats pub " + shellQuote(subject)
	if plainText(m.Body) && !bytes.Contains(m.Body, []byte("{{")) {
		return strings.Join(append([]string{cmd, shellQuote(string(m.Body))}, args...), " ")
	}
	return "printf %s " + shellQuote(base64.StdEncoding.EncodeToString(m.Body)) + " | base64 -d | " +
		strings.Join(append([]string{cmd, "--force-stdin"}, args...), " ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// plainText: UTF-8 with no control character but newline and tab.
func plainText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

// shellQuote quotes s for a POSIX shell: in single quotes, each ' as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
