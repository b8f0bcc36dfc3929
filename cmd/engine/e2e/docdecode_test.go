package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// The batched read's reply, decoded from docs/GROUPS.md's tables alone ("The batched read's
// reply"): its headers, its sections, and each CommitLog record's fields at the offsets the doc
// gives.

// docRecord is a message of the batched read's reply, decoded from the record's table.
type docRecord struct {
	queueID     int32
	queueOffset int64
	storeMs     int64
	topic       string
	body        []byte
	props       map[string]string
}

// docSection is one queue's section of the batched read's reply.
type docSection struct {
	queueID                          int32
	status                           byte
	nextOffset, minOffset, maxOffset int64
	records                          []docRecord
}

// The statuses of a section.
const (
	docFound    = 0
	docFenced   = 7
	docTooLarge = 8
)

// decodeReadReply decodes a reply of <api>.read: its headers, then "RSR1" and one section per
// queue of the request.
func decodeReadReply(m *nats.Msg, asked int) ([]docSection, error) {
	if st := m.Header.Get("Rs-Read-Status"); st != "OK" {
		code, _ := strconv.Atoi(m.Header.Get("Rs-Error-Code"))
		if st != "ERROR" || code == 0 {
			return nil, fmt.Errorf("read reply: status %q, code %q, body %q", st, m.Header.Get("Rs-Error-Code"), m.Data)
		}
		return nil, &docCodeError{code, m.Header.Get("Rs-Error")}
	}
	b := m.Data
	if len(b) < 4 || string(b[:4]) != "RSR1" {
		return nil, fmt.Errorf("read reply: no RSR1 (%d bytes)", len(b))
	}
	b = b[4:]
	var out []docSection
	for range asked {
		if len(b) < 4+1+8+8+8+4+4 {
			return nil, fmt.Errorf("read reply: a section's head cut at %d bytes", len(b))
		}
		s := docSection{
			queueID:    int32(binary.BigEndian.Uint32(b[0:])),
			status:     b[4],
			nextOffset: int64(binary.BigEndian.Uint64(b[5:])),
			minOffset:  int64(binary.BigEndian.Uint64(b[13:])),
			maxOffset:  int64(binary.BigEndian.Uint64(b[21:])),
		}
		count := binary.BigEndian.Uint32(b[29:])
		length := binary.BigEndian.Uint32(b[33:])
		b = b[37:]
		if uint64(length) > uint64(len(b)) {
			return nil, fmt.Errorf("read reply: queue %d: %d bytes of records, %d left", s.queueID, length, len(b))
		}
		recs := b[:length]
		b = b[length:]
		for range count {
			r, n, err := decodeDocRecord(recs)
			if err != nil {
				return nil, fmt.Errorf("read reply: queue %d: %w", s.queueID, err)
			}
			s.records = append(s.records, r)
			recs = recs[n:]
		}
		if len(recs) != 0 {
			return nil, fmt.Errorf("read reply: queue %d: %d bytes after %d records", s.queueID, len(recs), count)
		}
		out = append(out, s)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("read reply: %d bytes after %d sections", len(b), asked)
	}
	return out, nil
}

// decodeDocRecord decodes one CommitLog record by the doc's table and returns it with its size.
func decodeDocRecord(b []byte) (docRecord, int, error) {
	var r docRecord
	if len(b) < 48 {
		return r, 0, fmt.Errorf("a record cut at %d bytes", len(b))
	}
	total := int(int32(binary.BigEndian.Uint32(b[0:])))
	if total < 48 || total > len(b) {
		return r, 0, fmt.Errorf("TOTALSIZE %d, %d bytes left", total, len(b))
	}
	b = b[:total]
	magic := binary.BigEndian.Uint32(b[4:])
	if magic != 0xdaa320a7 && magic != 0xdaa320a8 {
		return r, 0, fmt.Errorf("MAGICCODE %#x", magic)
	}
	r.queueID = int32(binary.BigEndian.Uint32(b[12:]))
	r.queueOffset = int64(binary.BigEndian.Uint64(b[20:]))
	sysFlag := binary.BigEndian.Uint32(b[36:])
	if sysFlag&1 != 0 {
		return r, 0, errors.New("a compressed body: no RocketMQ producer wrote these")
	}
	host := func(ipv6 bool) int {
		if ipv6 {
			return 20
		}
		return 8
	}
	p := 48 + host(sysFlag&0x10 != 0)
	field := func(n int) ([]byte, error) {
		if n < 0 || p+n > len(b) {
			return nil, fmt.Errorf("a field of %d bytes at %d of a %d-byte record", n, p, len(b))
		}
		f := b[p : p+n]
		p += n
		return f, nil
	}
	f, err := field(8)
	if err != nil {
		return r, 0, err
	}
	r.storeMs = int64(binary.BigEndian.Uint64(f))
	if _, err := field(host(sysFlag&0x20 != 0) + 4 + 8); err != nil { // STOREHOST, RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET
		return r, 0, err
	}
	if f, err = field(4); err != nil {
		return r, 0, err
	}
	if r.body, err = field(int(int32(binary.BigEndian.Uint32(f)))); err != nil {
		return r, 0, err
	}
	topicLen := 0
	if magic == 0xdaa320a8 {
		if f, err = field(2); err == nil {
			topicLen = int(binary.BigEndian.Uint16(f))
		}
	} else if f, err = field(1); err == nil {
		topicLen = int(f[0])
	}
	if err != nil {
		return r, 0, err
	}
	if f, err = field(topicLen); err != nil {
		return r, 0, err
	}
	r.topic = string(f)
	if f, err = field(2); err != nil {
		return r, 0, err
	}
	props, err := field(int(int16(binary.BigEndian.Uint16(f))))
	if err != nil {
		return r, 0, err
	}
	if p != len(b) {
		return r, 0, fmt.Errorf("%d bytes after the properties", len(b)-p)
	}
	r.props = map[string]string{}
	for _, kv := range strings.Split(string(props), "\x02") {
		if name, value, ok := strings.Cut(kv, "\x01"); ok {
			r.props[name] = value
		}
	}
	return r, total, nil
}
