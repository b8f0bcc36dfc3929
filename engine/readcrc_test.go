package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rocketstore/engine/engine/api"
	"github.com/rocketstore/engine/internal/store/commitlog"
)

// TestConsumerRefusesDamagedRecord: the Go consumer (api.Consumer, pulls) never hands over a
// record that fails its CRC check: Next fails with the engine's 500 naming the CRC, and a
// consumer from the next offset reads on past it; Stats counts the refusals.
func TestConsumerRefusesDamagedRecord(t *testing.T) {
	a := serveAPI(t, testOptions(t, t.TempDir()), NATSOptions{QueuesPerTopic: 1})
	var acks []int64
	for i := range 3 {
		ack := a.store(t, apiMsg("crc.consumer", i))
		acks = append(acks, ack.CommitLogOffset)
	}
	e := a.Engine
	data := e.log.Queue().Files()[0].Data()
	v, err := commitlog.Parse(data[acks[1]:])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(v.Bytes(), []byte("body-001"))
	data[int(acks[1])+at] ^= 0x01

	k := a.client.NewConsumer(api.ConsumerConfig{Topic: "crc_consumer"})
	defer k.Close()
	res, err := k.Next(a.ctx)
	if api.CodeOf(err) != api.CodeInternal || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("consumer over the damaged record: %v, %v", res, err)
	}
	past := a.client.NewConsumer(api.ConsumerConfig{Topic: "crc_consumer", Offset: 2})
	defer past.Close()
	res, err = past.Next(a.ctx)
	if err != nil || len(res.Messages) != 1 || !bytes.HasPrefix(res.Messages[0].Body, []byte("body-002")) {
		t.Fatalf("past the damage: %v, %v", res, err)
	}
	if n := e.Stats().ReadCRCFailures; n != 1 {
		t.Fatalf("%d CRC failures counted, want 1", n)
	}
}
