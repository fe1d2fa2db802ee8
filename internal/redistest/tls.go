package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The TLS files of a server started WithTLS, in its directory.
const (
	caCertFile     = "ca.pem"
	serverCertFile = "server.pem"
	serverKeyFile  = "server.key"
)

// testPKI is a certificate authority of the test binary's own and one
// server certificate it signed, for 127.0.0.1, ::1 and localhost. Every
// server started WithTLS presents that certificate, so one CA file verifies
// all of them, and the nodes of a TLS cluster verify one another with it.
type testPKI struct {
	caPEM, certPEM, keyPEM []byte
	roots                  *x509.CertPool
}

// pki returns the test binary's PKI, generating it on first use.
var pki = sync.OnceValues(newPKI)

// pkiValidity is how long the generated certificates are valid; they are
// backdated by an hour against clock skew.
const pkiValidity = 7 * 24 * time.Hour

func newPKI() (*testPKI, error) {
	fail := func(err error) (*testPKI, error) {
		return nil, fmt.Errorf("redistest: generate the test CA: %w", err)
	}
	notBefore := time.Now().Add(-time.Hour)
	notAfter := notBefore.Add(pkiValidity)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	// A nil SerialNumber makes CreateCertificate pick a random one.
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{Organization: []string{"machinist redistest"}, CommonName: "redistest CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fail(err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"machinist redistest"}, CommonName: "localhost"},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		// ClientAuth too: a node presents it when it connects to another
		// node (cluster bus, replication).
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fail(err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &testPKI{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		roots:   roots,
	}, nil
}

// writeFiles writes the CA certificate, the server certificate and its key
// into dir.
func (p *testPKI) writeFiles(dir string) error {
	for name, data := range map[string][]byte{
		caCertFile:     p.caPEM,
		serverCertFile: p.certPEM,
		serverKeyFile:  p.keyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("redistest: %w", err)
		}
	}
	return nil
}

// clientConfig returns a client configuration that trusts the test CA only.
// Its ServerName is empty: crypto/tls takes it from the address dialled,
// and the certificate holds 127.0.0.1, ::1 and localhost.
func (p *testPKI) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: p.roots, MinVersion: tls.VersionTLS12}
}

// tlsArgs returns the redis-server arguments of a TLS server whose TLS port
// is port and whose files are in dir: no plain TCP port, clients not asked
// for a certificate, and, for a cluster node, TLS on the cluster bus and
// for replication.
func tlsArgs(port int, dir string, cluster bool) []string {
	args := []string{
		"--port", "0",
		"--tls-port", fmt.Sprint(port),
		"--tls-cert-file", filepath.Join(dir, serverCertFile),
		"--tls-key-file", filepath.Join(dir, serverKeyFile),
		"--tls-ca-cert-file", filepath.Join(dir, caCertFile),
		"--tls-auth-clients", "no",
		"--tls-replication", "yes",
	}
	if cluster {
		args = append(args, "--tls-cluster", "yes")
	}
	return args
}

// CACertFile returns the path of the PEM file of the CA that signed the
// server's certificate, for a client's CA setting (machinist's
// Redis.CACertFile, redis-cli --cacert), or "" if the server was not
// started WithTLS. The file lives as long as the server.
func (s *Server) CACertFile() string {
	if s.tlsConf == nil {
		return ""
	}
	return filepath.Join(s.dir, caCertFile)
}

// TLSConfig returns a client TLS configuration that trusts the server's
// certificate (and nothing else), a new one on each call, or nil if the
// server was not started WithTLS.
func (s *Server) TLSConfig() *tls.Config {
	if s.tlsConf == nil {
		return nil
	}
	return s.tlsConf.Clone()
}

// CACertFile is (*Server).CACertFile for a cluster started WithTLS: every
// node's certificate is signed by that CA.
func (c *Cluster) CACertFile() string { return c.nodes[0].CACertFile() }

// TLSConfig is (*Server).TLSConfig for a cluster started WithTLS.
func (c *Cluster) TLSConfig() *tls.Config { return c.nodes[0].TLSConfig() }

// errTLSUnsupported is what a test fails with when WithTLS is asked of a
// redis-server (or a redis-cli) built without TLS.
var errTLSUnsupported = errors.New("redistest: WithTLS needs redis-server and redis-cli built with TLS (BUILD_TLS=yes), and the installed ones are not: install a build that has it, such as Debian's or Ubuntu's redis-server package (`apt-get install -y redis-server`)")

// tlsUnsupported reports whether the server's log says that it was built
// without TLS: up to Redis 7.0 it does not know the tls-* directives; from
// 7.2 on it knows them but has no TLS connection type to listen with.
func (s *Server) tlsUnsupported() bool {
	return s.logContains("Bad directive") && s.logContains("tls-port") ||
		s.logContains("connection type tls") ||
		s.logContains("(tls), aborting")
}
