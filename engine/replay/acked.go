package replay

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/engine/api"
)

// ackEvent is a response to one of an acked replay's requests.
type ackEvent struct {
	seq          int64
	noResponders bool
}

// inFlight is a message sent and not acked yet.
type inFlight struct {
	seq    int64
	msgID  string // "" for the end message
	sentAt time.Time
	sends  int
}

// ackWindow holds the unacked messages in the order of their last send, so that the front is
// the first to time out (every send waits the same AckWait). Owned by the replay's goroutine.
type ackWindow struct {
	order *list.List // of *inFlight
	bySeq map[int64]*list.Element
}

func newAckWindow() *ackWindow {
	return &ackWindow{order: list.New(), bySeq: make(map[int64]*list.Element)}
}

func (w *ackWindow) len() int { return w.order.Len() }

func (w *ackWindow) add(f *inFlight) { w.bySeq[f.seq] = w.order.PushBack(f) }

// ack drops seq; acks of unknown or already acked messages are ignored.
func (w *ackWindow) ack(seq int64) {
	if el, ok := w.bySeq[seq]; ok {
		w.order.Remove(el)
		delete(w.bySeq, seq)
	}
}

func (w *ackWindow) oldest() *inFlight { return w.order.Front().Value.(*inFlight) }

// resent moves f, just sent again, to the back.
func (w *ackWindow) resent(f *inFlight) { w.order.MoveToBack(w.bySeq[f.seq]) }

// runAcked sends each message as a request with the reply subject <inbox>.<seq>, keeping at most
// MaxInFlight unacked; then it waits for every ack, and sends the end message the same way.
//
// A request nobody subscribes to gets a "no responders" status from the server on the inbox,
// which fails the replay at once (ErrNoReceiver), but only if the server delivers that status to
// the inbox's subscription: it picks one subscription of the publishing connection that matches
// the inbox, and a connection that also subscribes to ">" (the engine's, with the default
// subjects) may get it there instead. The receiver missing then shows as ack timeouts.
func (r *Replay) runAcked(ctx context.Context, res *Result) error {
	nc := r.req.Conn
	inbox := nc.NewInbox()
	r.inbox = inbox
	acks := make(chan ackEvent, r.req.MaxInFlight+1)
	done := make(chan struct{})
	defer close(done) // after the unsubscribe below: a callback blocked on acks returns
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		seq, err := strconv.ParseInt(m.Subject[len(inbox)+1:], 10, 64)
		if err != nil {
			return
		}
		ev := ackEvent{seq: seq, noResponders: len(m.Data) == 0 && m.Header.Get("Status") == "503"}
		select {
		case acks <- ev:
		case <-done:
		}
	})
	if err != nil {
		return fmt.Errorf("engine: replay: subscribe to the acks: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	w := newAckWindow()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	seq := int64(0)
	for {
		m, err := r.src.next(ctx)
		if err != nil {
			return err
		}
		if m == nil {
			break
		}
		for w.len() >= r.req.MaxInFlight {
			if r.req.OnWindowFull != nil {
				r.req.OnWindowFull()
			}
			if err := r.await(ctx, w, acks, timer, res); err != nil {
				return err
			}
		}
		seq++
		if err := r.sendRequest(w, r.natsMsg(m, seq, 0), &inFlight{seq: seq, msgID: m.MsgID, sends: 1}); err != nil {
			return err
		}
		res.Sent++
	}
	// The end goes out once everything is acked: after it, nothing of the replay comes again.
	for w.len() > 0 {
		if err := r.await(ctx, w, acks, timer, res); err != nil {
			return err
		}
	}
	seq++
	if err := r.sendRequest(w, r.endMsg(seq, res.Sent, ""), &inFlight{seq: seq, sends: 1}); err != nil {
		return err
	}
	for w.len() > 0 {
		if err := r.await(ctx, w, acks, timer, res); err != nil {
			return err
		}
	}
	return nil
}

// sendRequest publishes msg with the reply subject of f's seq and records f as sent now.
func (r *Replay) sendRequest(w *ackWindow, msg *nats.Msg, f *inFlight) error {
	msg.Reply = r.inbox + "." + strconv.FormatInt(f.seq, 10)
	if err := r.req.Conn.PublishMsg(msg); err != nil {
		return fmt.Errorf("engine: replay: publish: %w", err)
	}
	f.sentAt = time.Now()
	if f.sends == 1 {
		w.add(f)
	} else {
		w.resent(f)
	}
	return nil
}

// await waits for one ack, or for the oldest message to time out (then sends again every
// message that timed out, or fails once one was sent MaxDeliver times), or for ctx.
func (r *Replay) await(ctx context.Context, w *ackWindow, acks <-chan ackEvent, timer *time.Timer, res *Result) error {
	timer.Reset(time.Until(w.oldest().sentAt.Add(r.req.AckWait)))
	select {
	case ev := <-acks:
		if ev.noResponders {
			return fmt.Errorf("%w %q", ErrNoReceiver, r.req.Subject)
		}
		w.ack(ev.seq)
		return nil
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	now := time.Now()
	for range w.len() { // bounded: each timed-out message moves to the back once
		f := w.oldest()
		if f.sentAt.Add(r.req.AckWait).After(now) {
			break
		}
		if f.sends >= r.req.MaxDeliver {
			return fmt.Errorf("%w: replay seq %d (message %s) sent %d times, no ack within %v",
				ErrAckTimeout, f.seq, cmp.Or(f.msgID, "end"), f.sends, r.req.AckWait)
		}
		msg := r.endMsg(f.seq, res.Sent, "")
		if f.msgID != "" {
			m, err := r.store.Lookup(f.msgID) // read again rather than hold every body in flight
			if err != nil {
				return fmt.Errorf("engine: replay: read %s again to redeliver it: %w", f.msgID, err)
			}
			msg = r.natsMsg(&m, f.seq, f.sends)
		} else {
			msg.Header.Set(api.HeaderReplayRedelivered, strconv.Itoa(f.sends))
		}
		f.sends++
		if err := r.sendRequest(w, msg, f); err != nil {
			return err
		}
		res.Redelivered++
	}
	return nil
}
