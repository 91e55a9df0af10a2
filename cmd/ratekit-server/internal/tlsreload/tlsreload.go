// Package tlsreload builds TLS configurations from certificate files that
// are read again when they change, as Kubernetes rotates a Secret's files
// in place: every handshake looks at the files' size and modification
// time (a stat each, following symlinks) and reads them again when either
// moved, so the next connection after a rotation gets the new certificate
// without a restart. A set of files that does not load (a key written
// after its certificate) leaves the last good one in use until it does.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files names the files of one side of a connection.
type Files struct {
	// Cert and Key are the certificate chain and private key (PEM).
	Cert, Key string
	// CA is the file of the certificates that sign the peer's: a server's
	// clients' (then required), or a client's server's.
	CA string
	// SAN, on a server, is a DNS name (or address) the client's
	// certificate must hold; on a client, the name the server's must hold
	// instead of the dialled host.
	SAN string
}

// ErrNoFiles is returned when a certificate or key file is missing.
var ErrNoFiles = errors.New("tlsreload: a certificate needs both its certificate and key files")

// Server returns the configuration of a TLS server over f: its
// certificate from f.Cert and f.Key and, with f.CA, client certificates
// required and verified against f.CA only (not the system's roots: a
// certificate a public CA signed is no client of this server), with
// f.SAN among their names when set. The files must load now.
func Server(f Files, log *slog.Logger) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, ErrNoFiles
	}
	r := &reloader{files: f, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := r.current()
			c := base.Clone()
			c.Certificates = []tls.Certificate{*st.cert}
			if st.pool != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = st.pool
				if f.SAN != "" {
					c.VerifyPeerCertificate = verifySAN(f.SAN)
				}
			}
			return c, nil
		},
	}, nil
}

// Client returns the configuration of a TLS client over f: the
// certificate of f.Cert and f.Key when set, the server's verified against
// the system's roots plus f.CA (as envoy's xDS client does), named f.SAN
// when set. The files must load now.
func Client(f Files, log *slog.Logger) (*tls.Config, error) {
	r := &reloader{files: f, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.SAN}
	if f.CA != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsreload: %s holds no PEM certificate", f.CA)
		}
		c.RootCAs = pool
	}
	if f.Cert != "" || f.Key != "" {
		if f.Cert == "" || f.Key == "" {
			return nil, ErrNoFiles
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.current().cert, nil
		}
	}
	return c, nil
}

// verifySAN checks that the verified client certificate holds san.
func verifySAN(san string) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("tlsreload: no verified client certificate")
		}
		if err := chains[0][0].VerifyHostname(san); err != nil {
			return fmt.Errorf("tlsreload: client certificate: %w", err)
		}
		return nil
	}
}

// stamp is what a stat says of a file: a change of either is a change.
type stamp struct {
	size int64
	mod  time.Time
}

type state struct {
	cert *tls.Certificate
	pool *x509.CertPool // the server's client CAs
}

type reloader struct {
	files Files
	log   *slog.Logger

	mu   sync.Mutex
	seen [3]stamp // of Cert, Key, CA when last read, loaded or not
	st   state
}

func (r *reloader) stamps() [3]stamp {
	var out [3]stamp
	for i, name := range []string{r.files.Cert, r.files.Key, r.files.CA} {
		if name == "" {
			continue
		}
		if fi, err := os.Stat(name); err == nil {
			out[i] = stamp{fi.Size(), fi.ModTime()}
		}
	}
	return out
}

// load reads the files.
func (r *reloader) load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadLocked(r.stamps())
}

func (r *reloader) loadLocked(seen [3]stamp) error {
	r.seen = seen
	var st state
	if r.files.Cert != "" && r.files.Key != "" {
		c, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
		if err != nil {
			return fmt.Errorf("tlsreload: %w", err)
		}
		st.cert = &c
	}
	if r.files.CA != "" {
		pem, err := os.ReadFile(r.files.CA)
		if err != nil {
			return fmt.Errorf("tlsreload: %w", err)
		}
		st.pool = x509.NewCertPool()
		if !st.pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tlsreload: %s holds no PEM certificate", r.files.CA)
		}
	}
	r.st = st
	return nil
}

// current returns the files' contents, read again if they changed since
// they were last read; if they do not load, the last that did.
func (r *reloader) current() state {
	seen := r.stamps()
	r.mu.Lock()
	defer r.mu.Unlock()
	if seen != r.seen {
		if err := r.loadLocked(seen); err != nil && r.log != nil {
			r.log.Error("certificate files changed and do not load; the last good ones stay", "error", err.Error())
		} else if r.log != nil {
			r.log.Info("certificate files read again", "cert", r.files.Cert)
		}
	}
	return r.st
}
