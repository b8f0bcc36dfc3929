package natsserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/nats-io/nats.go"
)

// isTLSRefusal says err is a TLS failure that retrying cannot fix: the server's certificate is
// not trusted (wrong or missing --tlsca, a name that does not match), or the server refused
// ours (an alert from the peer: no client certificate, one it does not trust). Waiting for the
// server would only repeat it, so the engine gives up at start and says why. nats.go marks its
// own TLS failures with ErrTLS, among them a connection closed right after the handshake, which
// is how a server that refuses our certificate under TLS 1.3 often shows.
func isTLSRefusal(err error) bool {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		recordHdr  tls.RecordHeaderError
		opErr      *net.OpError
		alertError tls.AlertError
	)
	switch {
	case errors.Is(err, nats.ErrTLS):
		return true
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &verify), errors.As(err, &recordHdr), errors.As(err, &alertError):
		return true
	case errors.As(err, &opErr):
		// crypto/tls reports an alert received from the peer as a net.OpError "remote error".
		return opErr.Op == "remote error"
	}
	return false
}
