package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// testPKI is a certificate authority and a server and a client certificate it signed, as PEM
// files in a temporary directory.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	pool                                                 *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rocketstore test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{caFile: writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der),
			writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func writePEM(t *testing.T, path, kind string, der []byte) string {
	t.Helper()
	return writeConf(t, path, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
}

// TestConnectTLS: against a server that requires TLS with client certificates (mutual TLS), the
// engine connects with --tlsca, --tlscert and --tlskey and stores what a client publishes; without
// the CA, or without its client certificate, it fails to start and says why.
func TestConnectTLS(t *testing.T) {
	clearEnv(t)
	pki := newTestPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.serverCert, pki.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	ns := runServer(t, func(o *natsserver.Options) {
		o.TLS, o.TLSVerify, o.TLSTimeout = true, true, 5
		o.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientCAs: pki.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}
	})
	url := ns.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	srv, sink, err := serveArgs(t, ctx, append(smallStore(t.TempDir()), "--server", url,
		"--tlsca", pki.caFile, "--tlscert", pki.clientCert, "--tlskey", pki.clientKey)...)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.RootCAs(pki.caFile), nats.ClientCert(pki.clientCert, pki.clientKey), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	storeOne(t, nc, []byte("over mutual TLS"))
	if err := srv.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, sink)
	}

	for _, bad := range []struct {
		name string
		args []string
		want string // in the error, lower case
	}{
		{"no CA", []string{"--tlscert", pki.clientCert, "--tlskey", pki.clientKey}, "certificate"},
		{"no client certificate", []string{"--tlsca", pki.caFile}, "tls"},
	} {
		_, sink, err := serveArgs(t, ctx, append(append(smallStore(t.TempDir()), "--server", url), bad.args...)...)
		if err == nil || !strings.Contains(err.Error(), "connect to nats at "+url) || !strings.Contains(strings.ToLower(err.Error()), bad.want) {
			t.Fatalf("%s: %v, want a connection error about %q\n%s", bad.name, err, bad.want, sink)
		}
		t.Logf("%s: %v", bad.name, err)
	}
}
