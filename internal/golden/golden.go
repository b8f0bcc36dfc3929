// Package golden holds the golden vectors of the RocketMQ store format (vectors.json, a copy of
// the vectors that go with docs/STORE-FORMAT.md, produced by two independent encoders that
// agreed byte for byte), parsed into Go values for tests.
package golden

import (
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
)

//go:embed vectors.json
var raw []byte

// Record is one CommitLog record vector (TV1..TV5).
type Record struct {
	Topic            string     `json:"topic"`
	QueueID          int32      `json:"queue_id"`
	Flag             int32      `json:"flag"`
	QueueOffset      int64      `json:"queue_offset"`
	PhysOffset       int64      `json:"phys_offset"`
	SysFlag          int32      `json:"sys_flag"`
	BornTS           int64      `json:"born_ts"`
	BornHost         string     `json:"born_host"`
	StoreTS          int64      `json:"store_ts"`
	StoreHost        string     `json:"store_host"`
	ReconsumeTimes   int32      `json:"reconsume_times"`
	PreparedTxOffset int64      `json:"prepared_tx_offset"`
	BodyHex          string     `json:"body_hex"`
	ClientProps      [][]string `json:"client_properties_in_order"`
	StoredPropsEsc   string     `json:"stored_properties_string_escaped"`
	PropCRC          bool       `json:"enabledAppendPropCRC"`
	EffectiveSysFlag int32      `json:"effective_sysFlag"`
	TotalSize        int        `json:"totalSize"`
	BodyCRC          int32      `json:"bodyCRC"`
	RecordHex        string     `json:"record_hex"`
	OffsetMsgID      string     `json:"offsetMsgId"`
	TagsCode         int64      `json:"tagsCode"`
	CQUnitHex        string     `json:"cq_unit_hex"`
	CQFileAndPos     struct {
		File string `json:"file"`
		Pos  int64  `json:"pos"`
	} `json:"cq_file_and_pos"`
}

// Body is the decoded body.
func (r Record) Body() []byte { return mustHex(r.BodyHex) }

// Bytes is the decoded record.
func (r Record) Bytes() []byte { return mustHex(r.RecordHex) }

// CQUnit is the decoded ConsumeQueue unit.
func (r Record) CQUnit() []byte { return mustHex(r.CQUnitHex) }

// StoredProps is the stored properties string with its \x01 and \x02 escapes resolved.
func (r Record) StoredProps() string {
	s := strings.ReplaceAll(r.StoredPropsEsc, `\x01`, "\x01")
	return strings.ReplaceAll(s, `\x02`, "\x02")
}

// IndexEntry is one IndexFile entry vector.
type IndexEntry struct {
	Key             string `json:"key"`
	JavaHashCode    int32  `json:"java_hashCode"`
	KeyHash         int32  `json:"keyHash"`
	Slot            int64  `json:"slot"`
	SlotFileOffset  int64  `json:"slotFileOffset"`
	EntryFileOffset int64  `json:"entryFileOffset"`
	TimeDiffSeconds int32  `json:"timeDiffSeconds"`
	PrevIndex       int32  `json:"prevIndex"`
	EntryHex        string `json:"entryHex"`
}

// Entry is the decoded 20-byte entry.
func (e IndexEntry) Entry() []byte { return mustHex(e.EntryHex) }

// IndexHeader is the IndexFile header as fields.
type IndexHeader struct {
	BeginTimestamp int64 `json:"beginTimestamp"`
	EndTimestamp   int64 `json:"endTimestamp"`
	BeginPhyOffset int64 `json:"beginPhyOffset"`
	EndPhyOffset   int64 `json:"endPhyOffset"`
	HashSlotCount  int32 `json:"hashSlotCount"`
	IndexCount     int32 `json:"indexCount"`
}

// Vectors is the whole file.
type Vectors struct {
	TV1, TV2, TV3, TV4, TV5 Record
	BLANK                   struct {
		MaxBlank  int    `json:"maxBlank"`
		RecordHex string `json:"record_hex"`
	}
	INDEX struct {
		FileSize     int64        `json:"file_size"`
		Entries      []IndexEntry `json:"entries"`
		HeaderHex    string       `json:"header_hex"`
		HeaderFields IndexHeader  `json:"header_fields"`
	}
	INDEX_ROLLED_FIRST_ENTRY struct {
		Entry     IndexEntry `json:"entry"`
		HeaderHex string     `json:"header_hex"`
	}
	CHECKPOINT struct {
		First40Hex string `json:"first40_hex"`
		FileSize   int    `json:"file_size"`
	}
	HASHES map[string]int32
}

// Records returns TV1..TV5 by name.
func (v *Vectors) Records() map[string]Record {
	return map[string]Record{"TV1": v.TV1, "TV2": v.TV2, "TV3": v.TV3, "TV4": v.TV4, "TV5": v.TV5}
}

var load = sync.OnceValue(func() *Vectors {
	var v Vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		panic("golden: vectors.json: " + err.Error())
	}
	return &v
})

// Load returns the parsed vectors. Callers must not modify them.
func Load() *Vectors { return load() }

// Hex decodes a hex string or panics: the vectors are fixed.
func Hex(s string) []byte { return mustHex(s) }

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("golden: bad hex: " + err.Error())
	}
	return b
}
