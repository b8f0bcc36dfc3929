package readapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/offsets"
)

// apiDecoders are the read API's request decoders by endpoint, as the handlers call them (the
// replay's with the default prefix). Each returns the decoded request (a value, for the
// re-encoding check) or the error the endpoint replies with.
var apiDecoders = []struct {
	endpoint string
	decode   func([]byte) (any, error)
}{
	{api.EndpointGet, func(b []byte) (any, error) { return decodeGet(b) }},
	{api.EndpointPull, func(b []byte) (any, error) { return decodePull(b) }},
	{api.EndpointMsg, func(b []byte) (any, error) { return decodeMsg(b) }},
	{api.EndpointQuery, func(b []byte) (any, error) { return decodeQuery(b) }},
	{api.EndpointOffsetForTime, func(b []byte) (any, error) { return decodeOffsetForTime(b) }},
	{api.EndpointOffsets, func(b []byte) (any, error) { return decodeOffsets(b) }},
	{api.EndpointTopics, func(b []byte) (any, error) { return decodeTopics(b) }},
	{api.EndpointOffsetsForTime, func(b []byte) (any, error) { return decodeOffsetsForTime(b) }},
	{api.EndpointCommit, func(b []byte) (any, error) { return decodeCommit(b) }},
	{api.EndpointFetch, func(b []byte) (any, error) { return decodeFetch(b) }},
	{api.EndpointReplay, func(b []byte) (any, error) { return decodeReplay(b, api.DefaultPrefix) }},
}

// apiSeeds are requests for the fuzz target and the table test: valid ones, and one of each
// kind of hostile input.
var apiSeeds = []string{
	``, `{}`, `null`, `[]`, `"x"`, `1`, `{"topic":`, `{"topic":"x"} {}`, `{"topic":"x"}x`,
	`{"topic":"orders_eu","queueId":1,"offset":5,"max":10,"maxBytes":1000,"tags":["a","*"],"waitMs":100}`,
	`{"topic":1}`, `{"topic":"x","queue":1}`, `{"topic":"x","queueId":99999999999}`,
	`{"topic":"x","queueId":-1}`, `{"topic":"x","offset":-1}`, `{"topic":"x","max":-1}`,
	`{"topic":"x","offset":1e400}`, `{"topic":"x","offset":9223372036854775808}`,
	`{"topic":"x","waitMs":9223372036854775807,"max":9223372036854775807,"maxBytes":9223372036854775807}`,
	`{"topic":"../../etc","queueId":0}`, `{"topic":".."}`, `{"topic":"a/b"}`, `{"topic":"a\\b"}`,
	`{"topic":"a\u0000b"}`, `{"topic":"` + strings.Repeat("t", 128) + `"}`, `{"TOPIC":"x"}`,
	`{"topic":"\ud800"}`, `{"topic":"%RETRY%g"}`,
	`{"msgId":"7F00000100002A9F0000000000001F40","bodyOffset":1,"bodyMax":2}`, `{"msgId":"../x"}`,
	`{"msgId":""}`, `{"msgId":"7F00000100002A9F0000000000001F40","bodyOffset":-1}`,
	`{"topic":"x","key":"k","begin":1,"end":2,"max":3}`, `{"topic":"x","key":""}`, `{"topic":"x","key":"k","end":-1}`,
	`{"topic":"x","queueId":0,"timestamp":-5}`, `{"after":"x"}`, `{"after":1}`,
	`{"group":"g","topic":"x","queueId":0,"offset":3}`, `{"group":"a@b","topic":"x"}`, `{"group":"","topic":"x"}`,
	`{"group":"g","topic":"x","offset":-1}`, `{"group":"g","topic":"../x"}`,
	`{"topic":"x","subject":"out","mode":"paced","rate":10}`, `{"topic":"x","subject":"out.*"}`,
	`{"topic":"x","subject":"out.>"}`, `{"topic":"x","subject":"a..b"}`, `{"topic":"x","subject":""}`,
	`{"topic":"x","subject":"a b"}`, `{"topic":"x","subject":"$RS.API.get"}`, `{"topic":"x","subject":"$RS.API"}`,
	`{"topic":"x","subject":"` + strings.Repeat("s", 2000) + `"}`, `{"topic":"../x","subject":"out"}`,
	`{"topic":"x","subject":"out","mode":"fast"}`, `{"topic":"x","subject":"out","mode":"paced"}`,
	`{"topic":"x","subject":"out","mode":"paced","rate":1e-300}`, `{"topic":"x","subject":"out","ackWaitMs":9223372036854775807}`,
	`{"topic":"x","subject":"out","ackWaitMs":-9223372036854775808}`, `{"topic":"x","subject":"out","queues":[-1]}`,
	`{"topic":"x","subject":"out","startOffset":1,"startTime":1}`, `{"topic":"x","subject":"out","maxInFlight":1000000}`,
	`{"topic":"x","subject":"out","maxDeliver":-1}`, `{"topic":"x","subject":"out","rate":"fast"}`,
	`{"topic":"device","queueId":0,"subject":"device.*.temp"}`, `{"topic":"device","subject":"device.>.x"}`,
	`{"topic":"device","subject":"device..temp"}`, `{"topic":"device","subject":"device.7.temp","tags":["a"]}`,
}

// FuzzAPIRequest drives the read API's request decoding for every endpoint: whatever the bytes,
// no decoder panics, every error is a 400 with a description, and an accepted request is sound
// (valid topic, group and subject, no negative offset, count or queue id) and decodes the same
// once encoded again.
func FuzzAPIRequest(f *testing.F) {
	for _, s := range apiSeeds {
		for i := range apiDecoders {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, data []byte) {
		d := apiDecoders[int(endpoint)%len(apiDecoders)]
		req, err := d.decode(data)
		if err != nil {
			if code := replyCode(err); code != api.CodeBadRequest {
				t.Fatalf("%s %q: %v maps to %d, want 400", d.endpoint, data, err, code)
			}
			if err.Error() == "" {
				t.Fatalf("%s %q: an error without a description", d.endpoint, data)
			}
			return
		}
		checkDecoded(t, d.endpoint, data, req)
		if d.endpoint == api.EndpointReplay {
			return // decoded into the engine's request: not an api type to encode again
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("%s %q: %+v does not encode: %v", d.endpoint, data, req, err)
		}
		req2, err := d.decode(again)
		if err != nil || !reflect.DeepEqual(req, req2) {
			t.Fatalf("%s %q: %+v encodes to %s, which decodes to %+v, %v", d.endpoint, data, req, again, req2, err)
		}
	})
}

// checkDecoded checks what a decoder accepted (see FuzzAPIRequest).
func checkDecoded(t *testing.T, endpoint string, data []byte, req any) {
	t.Helper()
	fail := func(why string) { t.Fatalf("%s %q accepted as %+v: %s", endpoint, data, req, why) }
	topic := func(s string) {
		if err := commitlog.ValidateTopic(s); err != nil {
			fail(err.Error())
		}
	}
	group := func(g string) {
		if err := offsets.ValidateGroup(g); err != nil {
			fail(err.Error())
		}
	}
	subjectFilter := func(s string) {
		if s != "" && natssubject.Check(s, true) != "" {
			fail("an invalid subject filter")
		}
	}
	switch r := req.(type) {
	case api.GetRequest:
		topic(r.Topic)
		subjectFilter(r.Subject)
		if r.QueueID < 0 || r.Offset < 0 || r.Max < 0 || r.MaxBytes < 0 || r.WaitMs < 0 {
			fail("a negative field")
		}
	case api.PullRequest:
		topic(r.Topic)
		subjectFilter(r.Subject)
		if r.QueueID < 0 || r.Offset < 0 || r.Max < 0 || r.MaxBytes < 0 || r.WaitMs < 0 {
			fail("a negative field")
		}
		if n := api.PullMax(r.Max); n <= 0 || n > api.MaxPullMax {
			fail("pull max out of range")
		}
	case api.MsgRequest:
		if _, _, err := commitlog.ParseOffsetMsgID(r.MsgID); err != nil || r.BodyOffset < 0 || r.BodyMax < 0 {
			fail("bad id or body range")
		}
	case api.QueryRequest:
		topic(r.Topic)
		if r.Key == "" || r.Begin < 0 || r.End < 0 || r.Max < 0 {
			fail("no key or a negative field")
		}
	case api.OffsetForTimeRequest:
		topic(r.Topic)
		if r.QueueID < 0 || r.Timestamp < 0 {
			fail("a negative field")
		}
	case api.OffsetsRequest:
		topic(r.Topic)
	case api.OffsetsForTimeRequest:
		topic(r.Topic)
		if r.Timestamp < 0 {
			fail("a negative timestamp")
		}
	case api.TopicsRequest:
	case api.CommitRequest:
		group(r.Group)
		topic(r.Topic)
		if r.QueueID < 0 || r.Offset < 0 {
			fail("a negative field")
		}
	case api.FetchRequest:
		group(r.Group)
		topic(r.Topic)
		if r.QueueID < 0 {
			fail("a negative queue id")
		}
	case replay.Request:
		topic(r.Topic)
		if !replay.ValidSubject(r.Subject) || len(r.Subject) > replay.MaxSubjectLen ||
			r.Subject == api.DefaultPrefix || strings.HasPrefix(r.Subject, api.DefaultPrefix+".") {
			fail("a subject the engine must not publish to")
		}
		if r.StartOffset < 0 || r.StartTime < 0 || r.MaxInFlight <= 0 || r.MaxInFlight > api.MaxMaxInFlight ||
			r.AckWait <= 0 || r.MaxDeliver <= 0 {
			fail("a field out of range")
		}
		if r.Mode == replay.Paced && !(r.Rate > 0) {
			fail("a paced replay without a rate")
		}
		for _, q := range r.Queues {
			if q < 0 {
				fail("a negative queue id")
			}
		}
	default:
		t.Fatalf("%s: decoded into %T", endpoint, req)
	}
}

// TestAPIDecodeHostile: every endpoint's decoder on every seed: no panic, and errors are 400s;
// and each kind of hostile request is refused by the endpoints it concerns.
func TestAPIDecodeHostile(t *testing.T) {
	for _, s := range apiSeeds {
		for _, d := range apiDecoders {
			req, err := d.decode([]byte(s))
			if err != nil {
				if replyCode(err) != api.CodeBadRequest {
					t.Errorf("%s %q: %v is a %d", d.endpoint, s, err, replyCode(err))
				}
				continue
			}
			checkDecoded(t, d.endpoint, []byte(s), req)
		}
	}
	refused := map[string][]string{
		`{"topic":"../../etc","queueId":0}`:                             {"get", "pull", "offsets", "offset_for_time"},
		`{"topic":"a/b"}`:                                               {"get", "pull", "offsets", "offset_for_time"},
		`{"topic":".."}`:                                                {"get", "pull", "offsets"},
		`{"topic":"x","queueId":-1}`:                                    {"get", "pull", "offset_for_time", "offsets"},
		`{"topic":"x","offset":-1}`:                                     {"get", "pull"},
		`{"topic":"x","max":-1}`:                                        {"get", "pull"},
		`{"topic":"x","offset":1e400}`:                                  {"get", "pull"},
		`{"topic":"x","queue":1}`:                                       {"get", "pull", "offsets"},
		`{"group":"g","topic":"../x"}`:                                  {"commit", "fetch"},
		`{"topic":"x","subject":"out.*"}`:                               {"replay"},
		`{"topic":"x","subject":"out.>"}`:                               {"replay"},
		`{"topic":"x","subject":"a..b"}`:                                {"replay"},
		`{"topic":"x","subject":"` + strings.Repeat("s", 2000) + `"}`:   {"replay"},
		`{"topic":"../x","subject":"out"}`:                              {"replay"},
		`{"topic":"x","subject":"out","mode":"paced","rate":1e-300}`:    {"replay"},
		`{"topic":"x","subject":"out","ackWaitMs":9223372036854775807}`: {"replay"},
		`{"topic":"x","subject":"out","queues":[-1]}`:                   {"replay"},
		`{"msgId":"../x"}`:                                              {"msg"},
		`{"topic":"x","queueId":99999999999}`:                           {"get", "pull", "offset_for_time"},
		`{"topic":"x","waitMs":-1}`:                                     {"get", "pull"},
		`{"topic":"x","key":"k","end":-1}`:                              {"query"},
		`{"after":1}`:                                                   {"topics"},
		`{"group":"g","topic":"x","offset":-1}`:                         {"commit"},
		`{"topic":"x","subject":"out","startOffset":1,"startTime":1}`:   {"replay"},
		`{"topic":"x","subject":"out","ackWaitMs":-9223372036854775808,"mode":"acked"}`: {"replay"},
	}
	byName := map[string]func([]byte) (any, error){}
	for _, d := range apiDecoders {
		byName[d.endpoint] = d.decode
	}
	for body, eps := range refused {
		for _, ep := range eps {
			if _, err := byName[ep]([]byte(body)); err == nil || replyCode(err) != api.CodeBadRequest {
				t.Errorf("%s %.80s: %v, want a 400", ep, body, err)
			}
		}
	}
}
