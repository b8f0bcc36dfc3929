package commitlog

import (
	"strings"
	"testing"
)

func viewOf(t *testing.T, topic string, props []Property, storeTS int64) View {
	t.Helper()
	m := baseMessage()
	m.Topic = topic
	m.Properties = AppendProperties(nil, props)
	rec, err := AppendRecord(nil, &m, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	Stamp(rec, 0, 0, storeTS, false)
	v, err := Parse(rec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestViewDispatchHelpers(t *testing.T) {
	v := viewOf(t, "T", []Property{{PropKeys, " k1  k2 "}, {PropUniqKey, "U"}}, 1)
	var keys []string
	it := v.Keys()
	for {
		k, ok := it.Next()
		if !ok {
			break
		}
		keys = append(keys, string(k))
	}
	if strings.Join(keys, ",") != "k1,k2" {
		t.Errorf("keys %q", keys)
	}
	if u, ok := v.UniqKey(); !ok || string(u) != "U" {
		t.Errorf("uniq key %q %v", u, ok)
	}
	for _, tx := range []int32{TxNotType, TxPrepared, TxCommit, TxRollback} {
		m := baseMessage()
		m.SysFlag = tx | FlagMultiTags
		rec, _ := AppendRecord(nil, &m, EncodeOptions{})
		v, _ := Parse(rec)
		if v.TransactionType() != tx {
			t.Errorf("tx type %#x, want %#x", v.TransactionType(), tx)
		}
	}
}
