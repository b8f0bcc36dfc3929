package readapi

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/replay"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/reader"
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/offsets"
)

// Request decoding of the read API: one function per endpoint that decodes the JSON strictly
// (decodeRequest) and checks everything a request can be checked for without the store. Every
// error they return is a 400 (replyCode), and a request they accept names only valid topics, queue
// ids, groups and subjects: a topic is a RocketMQ topic (commitlog.ValidateTopic, so never a
// path: no '.', '/', '\' or NUL), and nothing a request holds is ever used as a file name
// without that check. The handlers call them first; FuzzAPIRequest calls them directly.

// checkRequestTopic: a topic is required and must be a valid RocketMQ topic.
func checkRequestTopic(topic string) error {
	if topic == "" {
		return badRequest{errors.New("no topic")}
	}
	if err := commitlog.ValidateTopic(topic); err != nil {
		return badRequest{err}
	}
	return nil
}

// checkQueueID: queue ids are never negative.
func checkQueueID(id int32) error {
	if id < 0 {
		return badRequest{fmt.Errorf("queueId %d: queue ids are 0 or more", id)}
	}
	return nil
}

func decodeGet(data []byte) (api.GetRequest, error) {
	var r api.GetRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	r.Tags = noEmptyTags(r.Tags)
	if err := checkSubjectFilter(r.Subject); err != nil {
		return r, err
	}
	return r, checkRead(r, r.Topic, r.QueueID, r.WaitMs < 0 || r.Max < 0 || r.MaxBytes < 0 || r.Offset < 0)
}

func decodePull(data []byte) (api.PullRequest, error) {
	var r api.PullRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	r.Tags = noEmptyTags(r.Tags)
	if err := checkSubjectFilter(r.Subject); err != nil {
		return r, err
	}
	return r, checkRead(r, r.Topic, r.QueueID, r.WaitMs < 0 || r.Max < 0 || r.MaxBytes < 0 || r.Offset < 0)
}

// noEmptyTags makes "tags":[] the same request as no tags (both mean every message), so that a
// request reads the same once encoded again, where omitempty leaves an empty list out.
func noEmptyTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// checkSubjectFilter checks a get's or a pull's subject filter: empty, a subject or a pattern.
func checkSubjectFilter(subject string) error {
	if subject == "" {
		return nil
	}
	if why := natssubject.Check(subject, true); why != "" {
		return badRequest{fmt.Errorf("subject %.200q is not a NATS subject or pattern: %s", subject, why)}
	}
	return nil
}

// checkRead checks what a get and a pull share: no negative number, a valid topic and queue.
func checkRead(r any, topic string, queueID int32, negative bool) error {
	if negative {
		return badRequest{fmt.Errorf("negative waitMs, max, maxBytes or offset: %+v", r)}
	}
	if err := checkRequestTopic(topic); err != nil {
		return err
	}
	return checkQueueID(queueID)
}

func decodeMsg(data []byte) (api.MsgRequest, error) {
	var r api.MsgRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if r.MsgID == "" {
		return r, badRequest{errors.New("no msgId")}
	}
	if _, _, err := commitlog.ParseOffsetMsgID(r.MsgID); err != nil {
		return r, fmt.Errorf("%w: %w", reader.ErrBadMsgID, err)
	}
	if r.BodyOffset < 0 || r.BodyMax < 0 {
		return r, badRequest{fmt.Errorf("negative bodyOffset %d or bodyMax %d", r.BodyOffset, r.BodyMax)}
	}
	return r, nil
}

func decodeQuery(data []byte) (api.QueryRequest, error) {
	var r api.QueryRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := checkRequestTopic(r.Topic); err != nil {
		return r, err
	}
	if r.Key == "" {
		return r, badRequest{errors.New("no key")}
	}
	if r.Begin < 0 || r.End < 0 || r.Max < 0 {
		return r, badRequest{fmt.Errorf("negative begin %d, end %d or max %d", r.Begin, r.End, r.Max)}
	}
	return r, nil
}

func decodeOffsetForTime(data []byte) (api.OffsetForTimeRequest, error) {
	var r api.OffsetForTimeRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := checkRequestTopic(r.Topic); err != nil {
		return r, err
	}
	if err := checkTimestamp(r.Timestamp); err != nil {
		return r, err
	}
	return r, checkQueueID(r.QueueID)
}

// checkTimestamp refuses a negative time (ms).
func checkTimestamp(ts int64) error {
	if ts < 0 {
		return badRequest{fmt.Errorf("negative timestamp %d", ts)}
	}
	return nil
}

func decodeOffsets(data []byte) (api.OffsetsRequest, error) {
	var r api.OffsetsRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	return r, checkRequestTopic(r.Topic)
}

func decodeOffsetsForTime(data []byte) (api.OffsetsForTimeRequest, error) {
	var r api.OffsetsForTimeRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := checkTimestamp(r.Timestamp); err != nil {
		return r, err
	}
	return r, checkRequestTopic(r.Topic)
}

func decodeTopics(data []byte) (api.TopicsRequest, error) {
	var r api.TopicsRequest
	err := decodeRequest(data, &r)
	return r, err
}

func decodeCommit(data []byte) (api.CommitRequest, error) {
	var r api.CommitRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := offsets.ValidateGroup(r.Group); err != nil {
		return r, err
	}
	if err := checkRequestTopic(r.Topic); err != nil {
		return r, err
	}
	if r.Offset < 0 || r.Epoch < 0 {
		return r, badRequest{fmt.Errorf("negative offset %d or epoch %d", r.Offset, r.Epoch)}
	}
	if len(r.MemberID) > offsets.MaxMemberLen {
		return r, badRequest{fmt.Errorf("memberId of %d bytes, more than %d", len(r.MemberID), offsets.MaxMemberLen)}
	}
	return r, checkQueueID(r.QueueID)
}

func decodeFetch(data []byte) (api.FetchRequest, error) {
	var r api.FetchRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if err := offsets.ValidateGroup(r.Group); err != nil {
		return r, err
	}
	if err := checkRequestTopic(r.Topic); err != nil {
		return r, err
	}
	return r, checkQueueID(r.QueueID)
}

// maxAckWaitMs is the largest ackWaitMs whose duration fits a time.Duration.
const maxAckWaitMs = math.MaxInt64 / int64(time.Millisecond)

// decodeReplay decodes a replay request into the engine's replay.Request (without its connection
// and headers, which the service adds) and checks it as far as it can be without the store
// (replay.Check), refusing a subject under the API's prefix.
func decodeReplay(data []byte, prefix string) (replay.Request, error) {
	var r api.ReplayRequest
	if err := decodeRequest(data, &r); err != nil {
		return replay.Request{}, err
	}
	if r.Subject == prefix || strings.HasPrefix(r.Subject, prefix+".") {
		return replay.Request{}, badRequest{fmt.Errorf("subject %q is under the read API's prefix", r.Subject)}
	}
	if err := checkSubjectFilter(r.FilterSubject); err != nil {
		return replay.Request{}, err
	}
	if r.AckWaitMs < 0 || r.AckWaitMs > maxAckWaitMs {
		return replay.Request{}, badRequest{fmt.Errorf("ackWaitMs %d: want 0 to %d", r.AckWaitMs, maxAckWaitMs)}
	}
	req := replay.Request{
		Subject: r.Subject, Topic: r.Topic, Queues: r.Queues, StartOffset: r.StartOffset,
		StartTime: r.StartTime, Tags: r.Tags, FilterSubject: r.FilterSubject, MaxInFlight: r.MaxInFlight,
		AckWait: time.Duration(r.AckWaitMs) * time.Millisecond, MaxDeliver: r.MaxDeliver, Rate: r.Rate,
	}
	switch r.Mode {
	case "", api.ReplayAcked:
		req.Mode = replay.Acked
	case api.ReplayPaced:
		req.Mode = replay.Paced
	default:
		return replay.Request{}, badRequest{fmt.Errorf("mode %q: want %q or %q", r.Mode, api.ReplayAcked, api.ReplayPaced)}
	}
	if err := replay.Check(&req); err != nil {
		return replay.Request{}, err
	}
	return req, nil
}
