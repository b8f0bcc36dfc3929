package indexfile

import "github.com/rocketstore/engine/internal/store/javahash"

// KeyHash is the index hash of the key "topic#key": javahash.IndexKeyHash(topic + "#" + key),
// computed without building the string. String.hashCode is a left fold (h = 31*h + unit), so the
// hash of a concatenation is the fold continued over the second part. The '#' between the parts
// also keeps UTF-8 decoding from crossing the boundary: it is never a continuation byte, so an
// invalid sequence at the end of topic decodes to the same U+FFFD units alone or concatenated.
func KeyHash(topic, key string) int32 { return KeyHashFrom(topicPrefixHash(topic), key) }

// topicPrefixHash is hashCode(topic + "#"), computed once per message.
func topicPrefixHash(topic string) int32 { return 31*javahash.Continue(0, topic) + '#' }

// KeyHashFrom finishes the hash of prefix + key and applies IndexKeyHash's abs.
func KeyHashFrom(prefix int32, key string) int32 {
	return javahash.IndexHash(javahash.Continue(prefix, key))
}

// TopicPrefixHash is the hash state after "topic#": KeyHashFrom finishes a key's hash from it,
// so that a record with several keys hashes its topic once.
func TopicPrefixHash(topic string) int32 { return topicPrefixHash(topic) }
