package ingress

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rocketstore/engine/internal/natssubject"
)

// A subscription to `>` receives every subject, also those ingress never stores ($-subjects such
// as the read API's $RS.API.*, reply inboxes _INBOX.>). A request on one of them that no other
// client receives would have got NATS's no-responders status from the server, but the server
// counts ingress's subscription as a responder and sends nothing: the requester waited for its
// timeout (a read with --no-read-api, a JetStream API call to a server without JetStream). So
// ingress answers such a request with the no-responders status itself, when the server says
// that no subscription but its own would receive it (Config.Interest). Whenever another
// subscriber has interest (the read API, a JetStream API, any service), ingress stays silent:
// that one answers.

// statusNoResponders is the header of NATS's no-responders status as nats.go reads it (a reply
// without a body whose Status is 503 is nats.ErrNoResponders). The server writes the status in
// the header block's first line, which a client library cannot; nats.go gives that line and a
// Status header the same meaning.
const statusNoResponders = "503"

// answerUnserved answers m, a message on a subject ingress never stores, with the no-responders
// status when it is a request that nobody else receives.
func (in *Ingress) answerUnserved(m *nats.Msg) {
	if m.Reply == "" || in.cfg.Interest == nil || in.cfg.NoReply {
		return
	}
	n := in.cfg.Interest(m.Subject)
	if in.ending.Load() {
		// Stopping: the drain takes ingress's interest off the server while its subscriptions
		// are still valid here, so n may count another receiver (the read API, which answers a
		// long poll 503 as it stops) and not ingress. ending is set before the drain starts,
		// so n, counted before this check found it unset, included ingress's own. What ingress
		// handles while stopping was routed before, perhaps to that one too: stay silent. A
		// request routed from then on gets the server's own no-responders.
		return
	}
	if n > in.ownInterest(m.Subject) {
		return // another subscriber receives it: its answer, not ours
	}
	reply := &nats.Msg{Subject: m.Reply, Header: nats.Header{"Status": []string{statusNoResponders}}}
	if err := in.cfg.Conn.PublishMsg(reply); err != nil {
		in.counters.replyFailures.Add(1)
		if ok, held := in.replyLog.Allow(time.Now()); ok {
			in.log.Warn().Err(err).Int64("more", held).Str("subject", m.Subject).
				Msg("ingress: could not answer a request nobody serves with no-responders")
		}
		return
	}
	in.counters.noResponders.Add(1)
}

// ownInterest is how many of ingress's live subscriptions subject matches.
func (in *Ingress) ownInterest(subject string) int {
	in.subsMu.Lock()
	defer in.subsMu.Unlock()
	n := 0
	for _, s := range in.subs {
		if s.sub.IsValid() && natssubject.Match(s.sub.Subject, subject) {
			n++
		}
	}
	return n
}
