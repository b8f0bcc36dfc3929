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
//	pull              PullRequest        (messages, end)     the same, each message a NATS message (see Pull)
//	msg               MsgRequest         Message             one message by its offset message id (body ranges)
//	query             QueryRequest       QueryReply          messages by key in a store-time range, newest first
//	offset_for_time   OffsetForTimeRequest OffsetForTimeReply first queue offset stored at or after a time
//	offsets           OffsetsRequest     OffsetsReply        min/max offsets (and store times) of a topic's queues
//	topics            TopicsRequest      TopicsReply         topics and their queue ids, by name, paged
//	commit            CommitRequest      CommitReply         record a consumer group's offset in a queue
//	fetch             FetchRequest       FetchReply          a consumer group's committed offset in a queue
//	replay            ReplayRequest      ReplayReply         start sending a topic onto a subject (see Replay)
//	read              ReadRequest        (binary)            several queues, many records in one message (docs/GROUPS.md)
//	group.*           (docs/GROUPS.md)                       consumer groups: join, heartbeat, release, leave, list, describe, reset, delete
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
//	400  bad request: malformed JSON, an unknown field, a missing or invalid field (a topic that
//	     is not a valid RocketMQ topic, a negative offset, count or queue id, a replay subject
//	     with wildcards or over 1024 bytes, a pull's reply subject over 1024 bytes), an invalid
//	     consumer group, a malformed message id
//	404  unknown topic or queue, message not found (never stored, or deleted by retention); on
//	     a partition's own subjects (partitions.go) the owner answers a queue it does not have
//	     as empty instead: it has no message yet
//	429  too many replays running (Replay)
//	500  anything else (a damaged store, a reply too large for the connection)
//	501  query on a store whose message index is off
//	503  the engine is closed or shutting down
//
// Client returns them as *Error (errors.As), with Code.
//
// # Bounds
//
// Every bound has a default and a cap. A request that asks for more than the cap is lowered to
// it, not refused, and the reply says what was applied: get's "applied" object, the Rs-Applied
// header of a pull's end message and of a batched read ("max=4096,waitMs=60000"):
//
//	           max (messages)            maxBytes (records' bytes)               waitMs
//	get        32, at most 1,024         256 KiB, at most 64 MiB or what fits    0, at most 60,000
//	pull       256, at most 4,096        4 MiB, at most 64 MiB                   0, at most 60,000
//	read       1,024, at most 65,536     4 MiB, at most what fits in a reply     0, at most 60,000
//
// Offsets: a queue's minOffset is its first readable offset, its maxOffset the offset its next
// message will get (exclusive: a queue holding offsets 0 to 6 has maxOffset 7; an empty one 0).
//
// A reply never exceeds the connection's max payload. The engine lowers a get's maxBytes to what
// fits once base64 and JSON are counted, measures the encoded reply, and stops early when the
// next message would not fit: Truncated is then set and NextOffset points at the first message
// left out, so reading on from NextOffset misses nothing. A message too large for any reply comes
// without its body (Partial set, BodySize its length); msg reads a body in ranges (MsgRequest's
// BodyOffset and BodyMax), and Client.Body puts them together.
//
// A filtered get (tags, subject) looks at 800 queue units at most (RocketMQ's bound; more when
// max is larger): when they all miss before the head of the queue, it answers NO_MATCHED_MESSAGE
// with ScanStopped set ("scanStopped":true) and NextOffset past them. The status then speaks
// for the units scanned only: later offsets may match, so get again from NextOffset (the CLI's
// get does; a pull scans up to 65,536 units).
//
// # What a read sees
//
// A read sees every message acked before it was sent: a get at or below an acked position, in a
// topic that acked message created, and a query by its key, wait for dispatch to put it in its
// queue and index when it has not yet (a few milliseconds, bounded by 5 s), and find it; msg
// finds an ack's msgId at once. Messages stored but not acked yet (async mode acks once written,
// sync mode once synced) may or may not be seen.
//
// # Long polling
//
// A get with waitMs > 0 that finds nothing at the head of its queue waits up to waitMs (at most
// MaxWaitMs) for a message to arrive. The engine answers long polls from goroutines bounded by
// engine.NATSOptions.MaxLongPolls; when they are all taken, a get is answered at once with
// WaitSkipped set, and a client should pause before asking again.
//
// # Pull
//
// pull is get for throughput: the same request fields (PullRequest: topic, queueId, offset, max,
// maxBytes, tags, subject, waitMs), as JSON, but no JSON reply. The engine publishes each message to the
// request's reply subject as a NATS message of its own, then an end message, and NATS delivers
// one publisher's messages to a subscriber in order, so the end message comes last. Client.Pull
// does this with an inbox of its own per call; Consumer reads a queue pull after pull with the
// next pull in flight while the caller handles a batch.
//
//	$RS.API.pull  {"topic":"orders","queueId":0,"offset":0,"max":1024,"waitMs":5000}  reply _INBOX.x
//
// Each message:
//
//   - subject: the request's reply subject; body: the body as stored.
//   - reply subject: the message's position (see PulledPrefix),
//     $RS.PULL.<queueOffset>.<storeTimestamp>.<msgId>, e.g.
//     $RS.PULL.41.1700000000123.7F00000100002A9F000000000001E240 (the message id ends with the
//     CommitLog offset in hex; topic and queue are the request's); not meant to be answered.
//   - headers: the original headers rebuilt from the properties, as a replay's (below): the
//     publisher's headers, the keys and tags headers, Nats-Msg-Id when the publisher sent one,
//     and two the engine adds to every message from NATS: Rs-Subject (the subject it came on)
//     and, when it had no Nats-Msg-Id, Rs-Uniq-Key (the id the engine gave it). A message stored
//     without any (Engine.Put) comes without a header block.
//   - a message whose body and headers exceed the connection's max payload comes without its
//     body, with the header Rs-Partial: <body size>; read the body with msg (Client.Body;
//     Consumer does it).
//
// The end message has no body and no reply subject, and the headers
//
//	Rs-Pull-Status       FOUND when messages were sent, else the get status (OFFSET_OVERFLOW_ONE
//	                     at the head, NO_MATCHED_MESSAGE, OFFSET_TOO_SMALL...), or ERROR
//	Rs-Pull-Next-Offset  the offset to pull from next
//	Rs-Pull-Count        how many messages were sent before it (a client checks it)
//	Rs-Pull-Min-Offset   the queue's bounds when it was read (not on an error before reading)
//	Rs-Pull-Max-Offset
//	Rs-Pull-Wait-Skipped true: it asked to wait, but every long-poll slot was taken
//	Rs-Pull-Scan-Stopped true: a filtered pull stopped at its scan limit (65,536 units) before
//	                     the head; later offsets may match: pull again from the next offset
//	Rs-Pull-Error-Code   on ERROR: the code, as in error replies (404 unknown topic or queue,
//	Rs-Pull-Error        400, 503...), and the description; micro's Nats-Service-Error(-Code) too
//
// A pull that fails after sending messages (a damaged record, shutdown) ends with ERROR and a
// next offset after the last message sent. Bounds: max messages (DefaultPullMax, at most
// MaxPullMax) and maxBytes of records (DefaultPullMaxBytes, at most MaxPullMaxBytes; the first
// message goes whatever its size); to go on, pull again from the next offset. Long polling is
// the get's (waitMs, the same MaxLongPolls slots). A pull without a reply subject, or with one
// under the API's prefix, is ignored.
//
// # Reading a whole topic
//
// Queues are independent: order holds within a queue, not across them. To read a topic whole,
// ask offsets for its queues (their minOffset and maxOffset) and read every queue at once, each
// on its own: one get or pull in flight per queue, the next from the previous one's next offset
// (Rs-Pull-Next-Offset), so that each queue's messages arrive in order. Consumer does this for
// one queue with the next pull sent as soon as the previous one's end message is in, while the
// caller handles its batch. The batched read (read) takes several queues in one request and
// answers with many records in one NATS message; a consumer group (docs/GROUPS.md) spreads the
// queues over several processes and keeps their place. A filtered get scans at most 800 queue
// units, a filtered pull 65,536, a filtered read what its max allows per queue (at least 800):
// when the scan stops before the head, get says scanStopped, pull Rs-Pull-Scan-Stopped, read
// NO_MATCHED_MESSAGE with a nextOffset below maxOffset; read on from there.
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
