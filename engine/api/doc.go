// Package api is the engine's read API over NATS: the wire types (JSON) of every operation and a
// Client for them. The engine serves it as a nats.go micro service named "rocketstore"
// (engine.Serve starts it unless NATSOptions.NoReadAPI); the CLI's online mode and any Go
// program use Client. The package depends on nats.go and the standard library only.
//
// # Subjects
//
// Every operation is a request on <prefix>.<endpoint>, with the prefix DefaultPrefix ("$RS.API")
// unless configured (engine.NATSOptions.APIPrefix, Client's WithPrefix). A $-subject is never
// stored by the engine's ingress, so API traffic never lands in the store.
//
//	endpoint          request            reply
//	get               GetRequest         GetReply            messages of a queue from an offset (long polling)
//	msg               MsgRequest         Message             one message by its offset message id (body ranges)
//	query             QueryRequest       QueryReply          messages by key in a store-time range, newest first
//	offset_for_time   OffsetForTimeRequest OffsetForTimeReply first queue offset stored at or after a time
//	offsets           OffsetsRequest     OffsetsReply        min/max offsets (and store times) of a topic's queues
//	topics            TopicsRequest      TopicsReply         topics and their queue ids, by name, paged
//	commit            CommitRequest      CommitReply         record a consumer group's offset in a queue
//	fetch             FetchRequest       FetchReply          a consumer group's committed offset in a queue
//	replay            ReplayRequest      ReplayReply         start sending a topic onto a subject (see Replay)
//
// Examples (field names are the JSON tags of the types in this package):
//
//	$RS.API.get      {"topic":"orders","queueId":0,"offset":0,"max":2,"waitMs":5000}
//	              -> {"status":"FOUND","nextOffset":2,"minOffset":0,"maxOffset":7,"messages":[
//	                  {"topic":"orders","queueId":0,"queueOffset":0,"commitLogOffset":0,"size":310,
//	                   "msgId":"7F00000100002A9F0000000000000000","storeTimestamp":1700000000123,
//	                   "bornTimestamp":1700000000120,"bornHost":"0.0.0.0:0","storeHost":"127.0.0.1:10911",
//	                   "tags":"eu","keys":"k1 k2","uniqKey":"id-1","properties":{"NATS_SUBJECT":"orders",
//	                   "UNIQ_KEY":"id-1","KEYS":"k1 k2","TAGS":"eu"},"body":"aGVsbG8=","bodySize":5}, ...]}
//	$RS.API.msg      {"msgId":"7F00000100002A9F0000000000000000"}        -> a Message
//	$RS.API.query    {"topic":"orders","key":"k1","begin":0,"end":0,"max":10} -> {"messages":[...]}
//	$RS.API.offset_for_time {"topic":"orders","queueId":0,"timestamp":1700000000000} -> {"offset":3}
//	$RS.API.offsets  {"topic":"orders"} -> {"topic":"orders","queues":[{"queueId":0,"minOffset":0,
//	                  "maxOffset":7,"minStoreTime":1700000000123,"maxStoreTime":1700000009000}]}
//	$RS.API.topics   {} -> {"topics":[{"name":"orders","queues":[0,1,2,3]}]}
//	$RS.API.commit   {"group":"billing","topic":"orders","queueId":0,"offset":7} -> {"offset":7}
//	$RS.API.fetch    {"group":"billing","topic":"orders","queueId":0} -> {"offset":7,"found":true}
//	$RS.API.replay   {"topic":"orders","subject":"replay.orders","startTime":1700000000000}
//	              -> {"replayId":"...","subject":"replay.orders","mode":"acked",
//	                  "queues":[{"queueId":0,"startOffset":3,"stopOffset":7}, ...],"maxCount":12}
//
// An empty request body is the zero request ("{}"), which topics accepts.
//
// # Errors
//
// A request that fails gets {"error":{"code":N,"description":"..."}} (the shape of the engine's
// ingress error replies), also signalled with micro's Nats-Service-Error and
// Nats-Service-Error-Code headers so that `nats micro stats` counts it. Codes:
//
//	400  bad request: malformed JSON, a missing or invalid field, an invalid consumer group,
//	     a malformed message id
//	404  unknown topic or queue, message not found (never stored, or deleted by retention)
//	429  too many replays running (Replay)
//	500  anything else (a damaged store, a reply too large for the connection)
//	501  query on a store whose message index is off
//	503  the engine is closed or shutting down
//
// Client returns them as *Error (errors.As), with Code.
//
// # Bounds
//
// A reply never exceeds the connection's max payload. The engine lowers a get's maxBytes to what
// fits once base64 and JSON are counted, measures the encoded reply, and stops early when the
// next message would not fit: Truncated is then set and NextOffset points at the first message
// left out, so reading on from NextOffset misses nothing. A message too large for any reply comes
// without its body (Partial set, BodySize its length); msg reads a body in ranges (MsgRequest's
// BodyOffset and BodyMax), and Client.Body puts them together.
//
// # Long polling
//
// A get with waitMs > 0 that finds nothing at the head of its queue waits up to waitMs (at most
// MaxWaitMs) for a message to arrive. The engine answers long polls from goroutines bounded by
// engine.NATSOptions.MaxLongPolls; when they are all taken, a get is answered at once with
// WaitSkipped set, and a client should pause before asking again.
//
// # Replay
//
// replay sends a topic (every queue, or the listed ones) from an offset or a time onto a subject,
// up to the end each queue had when the replay started, and answers at once with the plan. Each
// replayed message carries the body and the original headers rebuilt from the properties, plus
// the Header* headers below; the last message of a replay has no body and the headers
// Rs-Replay-End: true and Rs-Replay-Count (see ParseReplayEnd). Messages of one queue come in
// queue order; several queues are interleaved in CommitLog order, the order the engine stored
// them. Two modes:
//
//   - acked (the default): each message is published as a request whose reply subject belongs
//     to the replay; the receiver acks by responding, with any payload. At most MaxInFlight
//     (256) messages are unacked at a time. A message not acked within AckWaitMs (30 s) is sent
//     again, with Rs-Replay-Redelivered and the same Rs-Replay-Seq (a receiver may get a
//     message twice and can drop the copy), up to MaxDeliver (5) sends in all; after that, or
//     when the server answers "no responders", the replay fails: it stops, and its end message
//     carries Rs-Replay-Error. The end message goes out once every message is acked, and is a
//     request too: nothing of a replay comes after it. ("No responders" reaches the replay only
//     when the engine's connection does not itself subscribe to ">", its default subjects;
//     otherwise a missing receiver shows as ack timeouts, after AckWaitMs x MaxDeliver.)
//   - paced: messages are published at Rate messages per second, with no acks and no
//     redelivery; a receiver slower than Rate loses messages as a NATS slow consumer.
//
// The engine's connection does not receive its own messages (nats.NoEcho), so a replay onto a
// subject the engine stores is not stored again by that engine. Replay traffic shares that
// connection with the engine's acks and API replies.
package api
