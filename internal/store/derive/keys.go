package derive

import (
	"github.com/rocketstore/engine/internal/store/commitlog"
	"github.com/rocketstore/engine/internal/store/indexfile"
)

// Indexed says whether a record of transaction type tx gets IndexFile entries: all but
// rolled-back ones, as in RocketMQ's IndexService.buildIndex.
func Indexed(tx int32) bool { return tx != commitlog.TxRollback }

// TopicPrefix is the IndexFile hash state after "topic#" (indexfile.TopicPrefixHash), from which
// KeyHashes finishes each key's hash: a caller that sees one topic often works it out once.
func TopicPrefix(topic string) int32 { return indexfile.TopicPrefixHash(topic) }

// KeyHashes appends to dst the IndexFile key hashes of a record with props p, in the order the
// index puts them: topic#UNIQ_KEY, then topic#key for each non-empty key of KEYS (split at single
// spaces, as RocketMQ's buildIndex). prefix is TopicPrefix(p.Topic). Unlike RocketMQ it leaves
// out a UNIQ_KEY the engine generated (Props.UniqGenerated): an entry per message that no
// publisher can look up, which cost a tenth of storing a plain message.
func KeyHashes(dst []int32, prefix int32, p Props) []int32 {
	if p.UniqKey != "" && !p.UniqGenerated {
		dst = append(dst, indexfile.KeyHashFrom(prefix, p.UniqKey))
	}
	for keys := p.Keys; keys != ""; {
		var key string
		key, keys = nextKey(keys)
		if key != "" {
			dst = append(dst, indexfile.KeyHashFrom(prefix, key))
		}
	}
	return dst
}

// NumKeys is how many hashes KeyHashes appends for p.
func NumKeys(p Props) int {
	n := 0
	if p.UniqKey != "" && !p.UniqGenerated {
		n++
	}
	for keys := p.Keys; keys != ""; {
		var key string
		if key, keys = nextKey(keys); key != "" {
			n++
		}
	}
	return n
}

// nextKey splits the first token off keys.
func nextKey(keys string) (key, rest string) {
	for i := 0; i < len(keys); i++ {
		if keys[i] == commitlog.KeySeparator {
			return keys[:i], keys[i+1:]
		}
	}
	return keys, ""
}
