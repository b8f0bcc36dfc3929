package engine

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/wire"
)

// The read API part of TestServeHostileInput (hostile_test.go).

// hostileAPI sends malformed and hostile requests to every endpoint and checks the reply
// codes, micro's error counts and the debug lines; first is the ack of a message in the store.
func hostileAPI(t *testing.T, a *apiTest, first wire.Ack, logs *logSink) {
	nc := a.nc
	topic := first.Topic
	long := strings.Repeat("s", 2000)
	cases := []struct {
		ep, body string
		code     int
	}{
		{api.EndpointGet, `{"topic":`, 400},
		{api.EndpointGet, `[]`, 400},
		{api.EndpointGet, `{"topic":1}`, 400},
		{api.EndpointGet, `{"topic":"x","queue":1}`, 400},
		{api.EndpointGet, `{"topic":"x"} {}`, 400},
		{api.EndpointGet, `{"topic":"x","queueId":99999999999}`, 400},
		{api.EndpointGet, `{"topic":"x","offset":1e400}`, 400},
		{api.EndpointGet, `{"topic":"x","offset":-1}`, 400},
		{api.EndpointGet, `{"topic":"x","max":-1}`, 400},
		{api.EndpointGet, `{"topic":"x","queueId":-1}`, 400},
		{api.EndpointGet, `{"topic":"../../etc","queueId":0}`, 400},
		{api.EndpointGet, `{"topic":"` + topic + `/../../x"}`, 400},
		{api.EndpointGet, `{"topic":"nope"}`, 404},
		{api.EndpointGet, `{"topic":"` + topic + `","queueId":7}`, 404},
		{api.EndpointPull, `{"topic":`, 400},
		{api.EndpointPull, `{"topic":"../x"}`, 400},
		{api.EndpointPull, `{"topic":"x","offset":-1}`, 400},
		{api.EndpointPull, `{"topic":"x","max":9223372036854775808}`, 400},
		{api.EndpointMsg, `{"msgId":"../x"}`, 400},
		{api.EndpointMsg, `{"msgId":""}`, 400},
		{api.EndpointMsg, `{"msgId":"` + first.MsgID + `","bodyOffset":-1}`, 400},
		{api.EndpointQuery, `{"topic":"../x","key":"k"}`, 400},
		{api.EndpointQuery, `{"topic":"x","key":"k","max":-1}`, 400},
		{api.EndpointOffsetForTime, `{"topic":"a/b","queueId":0}`, 400},
		{api.EndpointOffsets, `{"topic":"../../etc"}`, 400},
		{api.EndpointOffsets, `{"topic":".."}`, 400},
		{api.EndpointOffsets, `{"topic":"a\u0000b"}`, 400},
		{api.EndpointOffsets, `{"topic":"nope"}`, 404},
		{api.EndpointTopics, `{"after":1}`, 400},
		{api.EndpointCommit, `{"group":"g","topic":"../x","queueId":0,"offset":1}`, 400},
		{api.EndpointCommit, `{"group":"g","topic":"` + topic + `","queueId":0,"offset":-1}`, 400},
		{api.EndpointCommit, `{"group":"a@b","topic":"` + topic + `","queueId":0,"offset":1}`, 400},
		{api.EndpointFetch, `{"group":"g","topic":"../x"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"a..b"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"out.*"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"out.>"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":">"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":""}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"a b"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"` + long + `"}`, 400},
		{api.EndpointReplay, `{"topic":"../x","subject":"out"}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"out","ackWaitMs":9223372036854775807}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"out","mode":"paced","rate":1e-300}`, 400},
		{api.EndpointReplay, `{"topic":"` + topic + `","subject":"out","queues":[-1]}`, 400},
		{api.EndpointReplay, `{"topic":"nope","subject":"out"}`, 404},
	}
	errorsBefore := microErrors(t, a.served)
	want := map[string]int{}
	for _, c := range cases {
		lines := logs.count("debug", refusedLine)
		reply, err := nc.RequestWithContext(a.ctx, api.Subject("", c.ep), []byte(c.body))
		if err != nil {
			t.Fatalf("%s %.80s: %v", c.ep, c.body, err)
		}
		code, desc := apiReplyCode(reply)
		if code != c.code || desc == "" {
			t.Errorf("%s %.80s: code %d (%q), want %d", c.ep, c.body, code, desc, c.code)
		}
		want[c.ep]++
		if n := logs.count("debug", refusedLine); n != lines+1 {
			t.Errorf("%s %.80s: %d debug lines %q, want 1", c.ep, c.body, n-lines, refusedLine)
		}
	}

	// A pull whose reply subject is too long to send messages to: the request's protocol line
	// fits the server's max_control_line (4096), but a pulled message's line (the same subject
	// plus the engine's reply subject) would not, and the server would cut the engine's
	// connection. Refused (the error alone fits), and the connection stays up.
	longReply := "_INBOX.hostile." + strings.Repeat("r", 4050)
	sub, err := nc.SubscribeSync(longReply)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(api.Subject("", api.EndpointPull), longReply, []byte(`{"topic":"`+topic+`"}`)); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(serveTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := apiReplyCode(m); code != 400 {
		t.Errorf("pull to a long reply subject: code %d, headers %v", code, m.Header)
	}
	want[api.EndpointPull]++

	// micro counts an error after its handler returns, just after the reply went out: a valid
	// request to each endpoint, answered, proves the handlers before it have returned.
	barrier := map[string]string{
		api.EndpointGet: `{"topic":"` + topic + `"}`, api.EndpointPull: `{"topic":"` + topic + `","max":1}`,
		api.EndpointMsg: `{"msgId":"` + first.MsgID + `"}`, api.EndpointQuery: `{"topic":"` + topic + `","key":"k001"}`,
		api.EndpointOffsetForTime: `{"topic":"` + topic + `"}`, api.EndpointOffsets: `{"topic":"` + topic + `"}`,
		api.EndpointTopics: `{}`, api.EndpointCommit: `{"group":"g","topic":"` + topic + `","offset":1}`,
		api.EndpointFetch:  `{"group":"g","topic":"` + topic + `"}`,
		api.EndpointReplay: `{"topic":"` + topic + `","subject":"hostile.replay","mode":"paced","rate":1000000}`,
	}
	for ep, body := range barrier {
		if ep == api.EndpointPull {
			// Messages, then the end message: wait for the end.
			in := nc.NewInbox()
			ps, err := nc.SubscribeSync(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.PublishRequest(api.Subject("", ep), in, []byte(body)); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				m, err := ps.NextMsg(serveTimeout)
				if err != nil {
					t.Fatal(err)
				}
				if m.Header.Get(api.HeaderPullStatus) != "" {
					break
				}
			}
			continue
		}
		reply, err := nc.RequestWithContext(a.ctx, api.Subject("", ep), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if code, desc := apiReplyCode(reply); code != 0 {
			t.Fatalf("barrier %s %s: %d %s", ep, body, code, desc)
		}
	}
	after := microErrors(t, a.served)
	for _, ep := range api.Endpoints {
		if got := after[ep] - errorsBefore[ep]; got != want[ep] {
			t.Errorf("endpoint %s: micro counted %d errors, want %d", ep, got, want[ep])
		}
	}
	if got := after[api.EndpointPull] - errorsBefore[api.EndpointPull]; got != want[api.EndpointPull] {
		t.Errorf("endpoint pull: micro counted %d errors, want %d", got, want[api.EndpointPull])
	}
}

// apiReplyCode reads an API error reply: the code from the JSON body, else from micro's headers
// (a pull's end message); 0 when the reply is not an error.
func apiReplyCode(m *nats.Msg) (int, string) {
	var er api.ErrorReply
	if json.Unmarshal(m.Data, &er) == nil && er.Error != nil {
		return er.Error.Code, er.Error.Description
	}
	if c := m.Header.Get(micro.ErrorCodeHeader); c != "" {
		n, _ := strconv.Atoi(c)
		return n, m.Header.Get(micro.ErrorHeader)
	}
	return 0, ""
}

// microErrors is micro's error count by endpoint.
func microErrors(t *testing.T, s *served) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range s.api.Stats().Endpoints {
		out[e.Name] = e.NumErrors
	}
	if len(out) == 0 {
		t.Fatal("no endpoint stats")
	}
	return out
}
