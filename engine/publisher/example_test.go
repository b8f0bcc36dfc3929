package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/publisher"
)

// Publishing a burst with batched acks: Publish returns a future at once (waiting only while the
// window is full), Flush waits for the last ack, and each future says where its message is.
func Example() {
	nc, err := nats.Connect(nats.DefaultURL) // a rocketstore engine's NATS server
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p, err := publisher.New(nc, publisher.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	futures := make([]*publisher.Future, 0, 1000)
	for i := range 1000 {
		f, err := p.Publish(ctx, "orders.eu", fmt.Appendf(nil, "order %d", i), nil)
		if err != nil {
			log.Fatal(err)
		}
		futures = append(futures, f)
	}
	if err := p.Flush(ctx); err != nil {
		var failed *publisher.FailedError
		if errors.As(err, &failed) {
			for _, f := range failed.Failures {
				log.Printf("seq %d (%s) not stored: %v", f.Seq, f.MsgID, f.Err)
			}
		}
		log.Fatal(err)
	}
	a, _ := futures[0].Wait(ctx)
	fmt.Printf("%s is stored at %s/%d@%d\n", a.MsgID, a.Topic, a.QueueID, a.QueueOffset)
}
