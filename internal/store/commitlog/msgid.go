package commitlog

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

const upperHex = "0123456789ABCDEF"

// Offset message id lengths in hex chars: store host IP (4 or 16 bytes), port (4), physical
// offset (8).
const (
	OffsetMsgIDLenV4 = 2 * (4 + 4 + 8)
	OffsetMsgIDLenV6 = 2 * (16 + 4 + 8)
)

// AppendOffsetMsgID appends the broker's offset message id (MessageDecoder.createMessageId) of a
// record: uppercase hex of the store host's IP, its port as a 4-byte int and the physical offset as
// an 8-byte long, 32 chars for an IPv4 host, 56 for IPv6. The host width follows IsHostV6. It
// allocates nothing when dst has room.
func AppendOffsetMsgID(dst []byte, storeHost netip.AddrPort, physicalOffset int64) []byte {
	a := storeHost.Addr()
	if IsHostV6(a) {
		ip := a.As16()
		dst = appendHex(dst, ip[:])
	} else {
		var ip [4]byte
		if a = a.Unmap(); a.Is4() {
			ip = a.As4()
		}
		dst = appendHex(dst, ip[:])
	}
	var tail [12]byte
	binary.BigEndian.PutUint32(tail[:], uint32(storeHost.Port()))
	binary.BigEndian.PutUint64(tail[4:], uint64(physicalOffset))
	return appendHex(dst, tail[:])
}

// OffsetMsgID returns AppendOffsetMsgID as a string.
func OffsetMsgID(storeHost netip.AddrPort, physicalOffset int64) string {
	return string(AppendOffsetMsgID(make([]byte, 0, OffsetMsgIDLenV6), storeHost, physicalOffset))
}

// AppendOffsetMsgID appends the record's offset message id, from the STOREHOST bytes exactly as
// stored and PHYSICALOFFSET. It allocates nothing when dst has room.
func (v View) AppendOffsetMsgID(dst []byte) []byte {
	dst = appendHex(dst, v.StoreHostBytes())
	return appendHex(dst, v.rec[PosPhysicalOffset:PosPhysicalOffset+8])
}

func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, upperHex[c>>4], upperHex[c&0xF])
	}
	return dst
}

// ParseOffsetMsgID decodes an offset message id (MessageDecoder.decodeMessageId): 32 hex chars for
// an IPv4 store host, 56 for IPv6, either case. An IPv4-mapped IPv6 address comes back as IPv4, as
// Java's InetAddress does. Errors wrap ErrInvalidMsgID: a wrong length, a non-hex char, or a port
// outside 0..65535.
func ParseOffsetMsgID(id string) (storeHost netip.AddrPort, physicalOffset int64, err error) {
	var raw [OffsetMsgIDLenV6 / 2]byte
	n := len(id) / 2
	if len(id) != OffsetMsgIDLenV4 && len(id) != OffsetMsgIDLenV6 {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: %d chars, want %d (IPv4) or %d (IPv6)",
			ErrInvalidMsgID, len(id), OffsetMsgIDLenV4, OffsetMsgIDLenV6)
	}
	for i := 0; i < n; i++ {
		hi, ok1 := unhex(id[2*i])
		lo, ok2 := unhex(id[2*i+1])
		if !ok1 || !ok2 {
			return netip.AddrPort{}, 0, fmt.Errorf("%w: %q is not hex at char %d", ErrInvalidMsgID, id, 2*i)
		}
		raw[i] = hi<<4 | lo
	}
	ipLen := n - 12
	var addr netip.Addr
	if ipLen == 4 {
		addr = netip.AddrFrom4([4]byte(raw[:4]))
	} else {
		addr = netip.AddrFrom16([16]byte(raw[:16])).Unmap()
	}
	port := int32(binary.BigEndian.Uint32(raw[ipLen:]))
	if port < 0 || port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("%w: port %d out of range", ErrInvalidMsgID, port)
	}
	off := int64(binary.BigEndian.Uint64(raw[ipLen+4:]))
	return netip.AddrPortFrom(addr, uint16(port)), off, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
