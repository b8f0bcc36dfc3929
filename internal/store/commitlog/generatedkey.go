package commitlog

import (
	"encoding/binary"
	"net/netip"
)

// GeneratedSalt is the salt an engine gives the UniqKeyGen of the UNIQ_KEYs it makes for
// messages that come without an id ("RSKG"): with the store host's address in front of it, it
// marks a key as one no publisher chose (IsGeneratedUniqKey), which the IndexFile then does not
// hold. A RocketMQ client puts its class loader's hash code there.
const GeneratedSalt int32 = 0x52534B47

// IsGeneratedUniqKey reports whether key has the form of a UNIQ_KEY that UniqKeyGen makes with
// GeneratedSalt for a record stored by storeHost: 32 uppercase hex digits (56 for an IPv6 store
// host) that start with the host's address, then any pid, then the salt. The store host is in
// the record, so dispatch from the log and ingress, which made the key, decide alike. A key made
// before the salt was fixed (a random one) or by a RocketMQ client does not pass; neither, but
// by a chance of 2^-64, does an id a publisher chose, unless it copied one of these keys.
func IsGeneratedUniqKey(key string, storeHost netip.Addr) bool {
	var ip [16]byte
	n := 0
	switch {
	case !storeHost.IsValid():
		return false // the generator put the time there: nothing marks such a key
	case IsHostV6(storeHost):
		ip, n = storeHost.As16(), 16
	default:
		a := storeHost.Unmap().As4()
		n = copy(ip[:], a[:])
	}
	if len(key) != 2*(n+2+4+4+2) {
		return false
	}
	var salt [4]byte
	binary.BigEndian.PutUint32(salt[:], uint32(GeneratedSalt))
	if !hexIs(key[:2*n], ip[:n]) || !hexIs(key[2*(n+2):2*(n+6)], salt[:]) {
		return false
	}
	for i := 2 * n; i < len(key); i++ {
		if c := key[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// hexIs reports whether h is the uppercase hex of b.
func hexIs(h string, b []byte) bool {
	for i, c := range b {
		if h[2*i] != upperHex[c>>4] || h[2*i+1] != upperHex[c&0xF] {
			return false
		}
	}
	return true
}
