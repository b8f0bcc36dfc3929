package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine"
	"github.com/rocketstore/engine/engine/api"
)

// TestGroupActions: with the credentials, this origin and the page's token, a reset goes to the
// earliest, the end, a time or an offset, and a delete deletes; both are refused (409) while the
// group has a member, and change nothing then.
func TestGroupActions(t *testing.T) {
	clk := newClock()
	srv := serveEngine(t, clk)
	c := newConsole(t, Options{Password: "pw", Actions: true}, ServerTarget(srv))
	e := srv.Engine
	var times []int64
	for i := range 4 {
		clk.advance(1000)
		r := put(t, e, engine.Message{Topic: "orders", QueueID: 0, Body: []byte{byte(i)}})
		times = append(times, r[0].StoreTimestamp)
	}
	if err := e.CommitOffset("billing", "orders", 0, 2); err != nil {
		t.Fatal(err)
	}
	auth := http.Header{"Authorization": {basic("admin", "pw")}}
	cookie, token := session(t, c, auth)
	act := func(path, body string) (int, string) {
		h := http.Header{"Authorization": {basic("admin", "pw")}, "Content-Type": {"application/json"},
			"Origin": {"http://127.0.0.1:8222"}, "Cookie": {cookie}, tokenHeader: {token}}
		w := c.do(request{method: http.MethodPost, path: "/console/api/group/" + path, body: body, header: h})
		return w.Code, w.Body.String()
	}
	committed := func() int64 {
		t.Helper()
		o, ok := e.FetchOffset("billing", "orders", 0)
		if !ok {
			return -1
		}
		return o
	}

	// A member: both actions are refused, and the offset stays.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := api.NewClient(nc).Join(ctx, api.MemberConfig{Group: "billing", Topic: "orders", ManualCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct{ path, body string }{
		{"reset", `{"topic":"orders","group":"billing","to":"earliest"}`},
		{"delete", `{"topic":"orders","group":"billing"}`},
	} {
		if code, body := act(a.path, a.body); code != http.StatusConflict || !strings.Contains(body, "members") {
			t.Fatalf("%s with a member: %d %s, want 409", a.path, code, body)
		}
	}
	if committed() != 2 {
		t.Fatalf("the offset moved to %d under refused actions", committed())
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		body string
		want int64
	}{
		{`{"topic":"orders","group":"billing","to":"latest"}`, 4},
		{`{"topic":"orders","group":"billing","to":"earliest"}`, 0},
		{`{"topic":"orders","group":"billing","to":"time","time":` + itoa(times[2]) + `}`, 2},
		{`{"topic":"orders","group":"billing","to":"offset","offset":3}`, 3},
	} {
		code, body := act("reset", c.body)
		var r struct {
			Queues []struct {
				QueueID int32 `json:"queue_id"`
				Offset  int64
			}
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil || len(r.Queues) == 0 || committed() != c.want {
			t.Fatalf("reset %s: %d %s, committed %d, want %d", c.body, code, body, committed(), c.want)
		}
	}
	for _, bad := range []string{`{"topic":"orders","group":"billing","to":"somewhere"}`, `{"topic":"orders","group":"billing","to":"offset","offset":-1}`,
		`{"topic":"orders"}`, `not json`, `{"topic":"orders","group":"billing","to":"latest","extra":1}`} {
		if code, body := act("reset", bad); code != http.StatusBadRequest {
			t.Fatalf("reset %s: %d %s, want 400", bad, code, body)
		}
	}
	if code, body := act("delete", `{"topic":"orders","group":"billing"}`); code != http.StatusOK || body != "{\"deleted\":true}\n" || committed() != -1 {
		t.Fatalf("delete: %d %s, committed %d", code, body, committed())
	}
	if code, body := act("delete", `{"topic":"orders","group":"billing"}`); code != http.StatusOK || body != "{\"deleted\":false}\n" {
		t.Fatalf("delete again: %d %s", code, body)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
