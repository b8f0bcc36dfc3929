// Package commitlog owns the byte format of one Apache RocketMQ CommitLog record: the codec that
// encodes a message into a record, the stamp the single writer applies to it, the zero-copy view
// readers decode it with, the pure scanner that recovery and dispatch use to tell valid records from
// a clean end, an end-of-file blank or a torn tail, and the two kinds of message id.
//
// The format is RocketMQ's, byte for byte (docs/STORE-FORMAT.md §1, §6, §9.6, §14). All
// integers are big-endian. A record with IPv4 born and store hosts, version 1:
//
//	offset size field
//	     0    4 TOTALSIZE            whole record, this field included
//	     4    4 MAGICCODE            0xDAA320A7 (V1, 1-byte topic length) or 0xDAA320AB (V2, 2-byte)
//	     8    4 BODYCRC              crc32.ChecksumIEEE(body) & 0x7FFFFFFF, 0 for an empty body
//	    12    4 QUEUEID
//	    16    4 FLAG
//	    20    8 QUEUEOFFSET          stamped by the writer
//	    28    8 PHYSICALOFFSET       stamped by the writer
//	    36    4 SYSFLAG              bit 0x10: born host is IPv6 (+12), 0x20: store host is IPv6 (+12)
//	    40    8 BORNTIMESTAMP
//	    48    8 BORNHOST             4-byte IPv4 + 4-byte port, or 16 + 4 with SYSFLAG 0x10
//	    56    8 STORETIMESTAMP       stamped by the writer (68 with an IPv6 born host)
//	    64    8 STOREHOST            4 + 4, or 16 + 4 with SYSFLAG 0x20
//	    72    4 RECONSUMETIMES
//	    76    8 PREPARED TX OFFSET
//	    84    4 BODYLENGTH           then BODY
//	  88+B  1|2 TOPICLENGTH          then TOPIC; 1 byte in V1, 2 bytes in V2
//	     …    2 PROPERTIESLENGTH     then PROPERTIES: name 0x01 value 0x02, repeated
//
// The work is split so that the single writer does as little as possible: [AppendRecord] runs in
// parallel before the writer and produces a complete record with every field except QUEUEOFFSET,
// PHYSICALOFFSET and STORETIMESTAMP; the writer copies it into the mapped segment and calls [Stamp]
// on the copy, which fills those three fields and, when enabled, the whole-record CRC property.
//
// Everything here is synchronous and allocation-free on the hot paths; nothing does I/O. The scanner
// ([Scan], [CheckRecord]) is a pure function over bytes so that it can be fuzzed, and it never panics
// on any input.
package commitlog
