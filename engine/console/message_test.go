package console

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine"
)

// TestMessagePage: a message's page has its fields, every property, the body as text and as
// indented JSON when it is JSON (base64 always), and a nats pub command with its headers; a
// binary body goes through stdin; the whole body is a download.
func TestMessagePage(t *testing.T) {
	e := openEngine(t, nil)
	c := newConsole(t, Options{}, Target{Store: e, Routing: func() engine.Routing { return engine.Routing{} }})
	body := `{"order":42,"note":"it's <b>here</b>"}`
	r := put(t, e, engine.Message{Topic: "orders_eu", QueueID: 2, Body: []byte(body), Keys: []string{"order-42", "cust-7"},
		Tags: "priority", MsgID: "pub-1",
		Properties: map[string]string{"NATS_SUBJECT": "orders.eu", "Trace": "a'b", "Trace#2": "second"}})
	var m MessageJSON
	getJSON(t, c, "/console/api/message", vals("id", r[0].MsgID), &m)
	if m.Subject != "orders.eu" || m.QueueID != 2 || m.Keys != "order-42 cust-7" || m.UniqKey != "pub-1" || m.Tags != "priority" {
		t.Fatalf("fields %+v", m.SummaryJSON)
	}
	if m.Text == nil || *m.Text != body || m.JSON == nil || !strings.Contains(*m.JSON, "\n  \"order\": 42") {
		t.Fatalf("text %v, json %v", m.Text, m.JSON)
	}
	if b, _ := base64.StdEncoding.DecodeString(m.Body); string(b) != body {
		t.Fatalf("body %q", b)
	}
	props := map[string]string{}
	for _, p := range m.Properties {
		props[p[0]] = p[1]
	}
	if props["Trace"] != "a'b" || props["KEYS"] != "order-42 cust-7" || props["UNIQ_KEY"] != "pub-1" {
		t.Fatalf("properties %v", props)
	}
	want := `nats pub 'orders.eu' '{"order":42,"note":"it'\''s <b>here</b>"}' -H 'Rmq-Keys:order-42 cust-7' -H 'Rmq-Tags:priority' -H 'Trace:a'\''b' -H 'Trace:second'`
	if m.NatsPub != want {
		t.Fatalf("nats pub:\n%s\nwant\n%s", m.NatsPub, want)
	}

	bin := []byte{0, 1, 2, 0xff, '{', '{'}
	r = put(t, e, engine.Message{Topic: "raw", Body: bin})
	m = MessageJSON{}
	getJSON(t, c, "/console/api/message", vals("id", r[0].MsgID), &m)
	if m.Text != nil || m.JSON != nil || m.NatsPub != "printf %s 'AAEC/3t7' | base64 -d | nats pub 'raw' --force-stdin" {
		t.Fatalf("binary: text %v, nats pub %s", m.Text, m.NatsPub)
	}
	w := c.do(request{path: "/console/api/message/body", params: vals("id", r[0].MsgID)})
	if w.Code != http.StatusOK || w.Body.String() != string(bin) || !strings.HasPrefix(w.Header().Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d %q %v", w.Code, w.Body, w.Header())
	}
	for id, code := range map[string]int{"nonsense": 400, "7F0000010000000000000000DEADBEEF": 404} {
		if w := c.do(request{path: "/console/api/message", params: vals("id", id)}); w.Code != code {
			t.Fatalf("id %s: %d %s, want %d", id, w.Code, w.Body, code)
		}
	}
}

// TestNotAttached: before the engine runs (recovery) the pages load and the API says why there
// is nothing to read.
func TestNotAttached(t *testing.T) {
	c, err := New(Options{Addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if w := c.do(request{path: "/console/"}); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "/console/assets/app.js") {
		t.Fatalf("page: %d", w.Code)
	}
	for _, p := range []string{"/console/api/topics", "/console/api/messages", "/console/api/groups"} {
		if w := c.do(request{path: p, params: vals("topic", "x")}); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "not running") {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
	}
	if w := c.do(request{path: "/console/api/nope"}); w.Code != http.StatusNotFound {
		t.Fatalf("unknown API: %d", w.Code)
	}
	if w := c.do(request{path: "/console/assets/nope.js"}); w.Code != http.StatusNotFound {
		t.Fatalf("unknown asset: %d", w.Code)
	}
}
