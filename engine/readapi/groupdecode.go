package readapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/engine/groups"
	"github.com/rocketstore/engine/internal/natssubject"
	"github.com/rocketstore/engine/internal/store/offsets"
)

// Request decoding of the consumer group endpoints (docs/GROUPS.md), as decode.go's: strict JSON,
// and everything checked that can be without the coordinator; every error is a 400.

// maxNotifySubject bounds a member's notify subject, as a pull's reply subject is bounded.
const maxNotifySubject = 1024

// maxGroupQueues bounds the queues a release, a leave or a read names.
const maxGroupQueues = 1 << 16

func checkGroupKey(group, topic string) (groups.Key, error) {
	if err := offsets.ValidateGroup(group); err != nil {
		return groups.Key{}, badRequest{err}
	}
	if err := checkRequestTopic(topic); err != nil {
		return groups.Key{}, err
	}
	return groups.Key{Group: group, Topic: topic}, nil
}

func checkMemberID(id string) error {
	switch {
	case id == "":
		return badRequest{errors.New("no memberId")}
	case len(id) > offsets.MaxMemberLen:
		return badRequest{fmt.Errorf("memberId of %d bytes, more than %d", len(id), offsets.MaxMemberLen)}
	}
	return nil
}

func decodeJoin(data []byte, prefix string) (groups.JoinRequest, error) {
	var r api.JoinRequest
	if err := decodeRequest(data, &r); err != nil {
		return groups.JoinRequest{}, err
	}
	key, err := checkGroupKey(r.Group, r.Topic)
	if err != nil {
		return groups.JoinRequest{}, err
	}
	if err := checkSubjectFilter(r.Subject); err != nil {
		return groups.JoinRequest{}, err
	}
	if len(r.MemberID) > offsets.MaxMemberLen || len(r.ClientID) > 256 {
		return groups.JoinRequest{}, badRequest{fmt.Errorf("memberId over %d bytes or clientId over 256", offsets.MaxMemberLen)}
	}
	if r.Notify != "" {
		if why := natssubject.Check(r.Notify, false); why != "" || len(r.Notify) > maxNotifySubject {
			return groups.JoinRequest{}, badRequest{fmt.Errorf("notify %.200q is not a subject without wildcards of at most %d bytes: %s", r.Notify, maxNotifySubject, why)}
		}
		if r.Notify == prefix || strings.HasPrefix(r.Notify, prefix+".") {
			return groups.JoinRequest{}, badRequest{fmt.Errorf("notify %.200q is under the API's prefix %s", r.Notify, prefix)}
		}
	}
	req := groups.JoinRequest{Key: key, Subject: r.Subject, MemberID: r.MemberID, ClientID: r.ClientID, Notify: r.Notify}
	switch r.Start {
	case "", api.StartEarliest:
	case api.StartLatest:
		req.Start = groups.StartLatest
	default:
		return groups.JoinRequest{}, badRequest{fmt.Errorf("start %.50q: %q or %q", r.Start, api.StartEarliest, api.StartLatest)}
	}
	return req, nil
}

func decodeMember(data []byte) (groups.Key, string, error) {
	var r api.MemberRequest
	if err := decodeRequest(data, &r); err != nil {
		return groups.Key{}, "", err
	}
	key, err := checkGroupKey(r.Group, r.Topic)
	if err != nil {
		return key, "", err
	}
	return key, r.MemberID, checkMemberID(r.MemberID)
}

func decodeRelease(data []byte) (groups.Key, string, []groups.QueueCommit, error) {
	var r api.ReleaseRequest
	if err := decodeRequest(data, &r); err != nil {
		return groups.Key{}, "", nil, err
	}
	key, err := checkGroupKey(r.Group, r.Topic)
	if err != nil {
		return key, "", nil, err
	}
	if err := checkMemberID(r.MemberID); err != nil {
		return key, "", nil, err
	}
	if len(r.Queues) > maxGroupQueues {
		return key, "", nil, badRequest{fmt.Errorf("%d queues, more than %d", len(r.Queues), maxGroupQueues)}
	}
	out := make([]groups.QueueCommit, 0, len(r.Queues))
	for _, q := range r.Queues {
		if q.QueueID < 0 || q.Offset < 0 || q.Epoch < 0 {
			return key, "", nil, badRequest{fmt.Errorf("queue %d, epoch %d, offset %d: none may be negative", q.QueueID, q.Epoch, q.Offset)}
		}
		out = append(out, groups.QueueCommit{QueueID: q.QueueID, Epoch: q.Epoch, Offset: q.Offset})
	}
	return key, r.MemberID, out, nil
}

func decodeGroup(data []byte) (groups.Key, error) {
	var r api.GroupRequest
	if err := decodeRequest(data, &r); err != nil {
		return groups.Key{}, err
	}
	return checkGroupKey(r.Group, r.Topic)
}

func decodeGroupList(data []byte) (api.GroupListRequest, error) {
	var r api.GroupListRequest
	if err := decodeRequest(data, &r); err != nil {
		return r, err
	}
	if r.Max < 0 {
		return r, badRequest{fmt.Errorf("max %d", r.Max)}
	}
	if r.Max == 0 || r.Max > 1000 {
		r.Max = min(max(r.Max, api.DefaultGroupListMax), 1000)
	}
	if len(r.After) > 512 || len(r.Match) > 512 {
		return r, badRequest{errors.New("after or match over 512 bytes")}
	}
	return r, nil
}

func decodeGroupReset(data []byte) (groups.Key, api.GroupResetRequest, error) {
	var r api.GroupResetRequest
	if err := decodeRequest(data, &r); err != nil {
		return groups.Key{}, r, err
	}
	key, err := checkGroupKey(r.Group, r.Topic)
	if err != nil {
		return key, r, err
	}
	switch {
	case (r.Offset == nil) == (r.Timestamp == nil):
		return key, r, badRequest{errors.New("give either offset or timestamp")}
	case r.Offset != nil && *r.Offset < 0:
		return key, r, badRequest{fmt.Errorf("offset %d", *r.Offset)}
	case len(r.Queues) > maxGroupQueues:
		return key, r, badRequest{fmt.Errorf("%d queues, more than %d", len(r.Queues), maxGroupQueues)}
	}
	for _, q := range r.Queues {
		if err := checkQueueID(q); err != nil {
			return key, r, err
		}
	}
	return key, r, nil
}
