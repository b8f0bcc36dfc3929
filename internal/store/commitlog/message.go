package commitlog

import "net/netip"

// Message is what the encoder turns into a record: every field a producer or the ingress decides.
// The three fields only the single writer can know (queue offset, physical offset, store
// timestamp) are not here; Stamp writes them.
//
// Body and Properties are read, never kept: AppendRecord copies them into the record.
type Message struct {
	Topic   string
	QueueID int32
	Flag    int32 // opaque client flag
	// SysFlag holds the client's bits (compression, multi-tags, transaction type, batch). The
	// encoder replaces the two V6 bits with what BornHost and StoreHost need.
	SysFlag                   int32
	BornTimestamp             int64 // producer clock, ms
	BornHost                  netip.AddrPort
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	// Properties is the encoded properties string (name 0x01 value 0x02 ...), built with
	// AppendProperty or AppendProperties(JavaHashMapOrder(...)). It is stored as is, except that
	// __CRC32# entries are dropped (see AppendRecord).
	Properties []byte
}

// Record is an owned, fully decoded copy of a stored record, for tests and tools; the hot paths use
// View, which copies nothing.
type Record struct {
	// Message holds the stored fields; its SysFlag is the stored SYSFLAG, V6 bits included, and its
	// Properties are the stored ones, __CRC32# entry included.
	Message
	Version        Version
	TotalSize      int
	BodyCRC        int32
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
}
