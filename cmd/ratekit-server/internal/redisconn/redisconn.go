// Package redisconn builds the server's Redis client from envoy's
// REDIS_* settings, and the two stores over it. Store construction lives
// here alone, so that a move of the library's constructors is one edit.
package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
	"github.com/ratekit/ratekit/redisstore"
)

// Stores are the server's stores over one client.
type Stores struct {
	Client redis.UniversalClient
	Compat *compat.Store     // envoy's counting
	Native *redisstore.Store // ratekit's algorithms
}

// Close closes the stores, then the client.
func (s *Stores) Close() error {
	return errors.Join(s.Compat.Close(), s.Native.Close(), s.Client.Close())
}

// Open builds the client REDIS_TYPE names (a *redis.Client, a
// Sentinel-backed failover *redis.Client or a *redis.ClusterClient) with
// the settings' pool, auth, TLS and timeouts, and the stores over it. It
// does not dial: the first calls do, and a Redis that is not up yet is
// one the Limiters' failure policy decides without.
func Open(s settings.Settings) (*Stores, error) {
	tlsConf, err := tlsConfig(s)
	if err != nil {
		return nil, err
	}
	user, pass := splitAuth(s.RedisAuth)
	network := "tcp"
	if s.RedisSocketType == "unix" {
		network = "unix"
	}
	var client redis.UniversalClient
	switch s.RedisType {
	case "single":
		client = redis.NewClient(&redis.Options{
			Network: network, Addr: s.RedisURL, Username: user, Password: pass, TLSConfig: tlsConf,
			PoolSize: s.RedisPoolSize, DialTimeout: s.RedisTimeout, ReadTimeout: s.RedisTimeout, WriteTimeout: s.RedisTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		})
	case "sentinel":
		parts := strings.Split(s.RedisURL, ",")
		if len(parts) < 2 {
			return nil, fmt.Errorf("REDIS_URL=%q: REDIS_TYPE=SENTINEL wants the master's name and then the Sentinels, comma-separated", s.RedisURL)
		}
		suser, spass := splitAuth(s.RedisSentinelAuth)
		client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: parts[0], SentinelAddrs: parts[1:], SentinelUsername: suser, SentinelPassword: spass,
			Username: user, Password: pass, TLSConfig: tlsConf,
			PoolSize: s.RedisPoolSize, DialTimeout: s.RedisTimeout, ReadTimeout: s.RedisTimeout, WriteTimeout: s.RedisTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
		})
	case "cluster":
		client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: strings.Split(s.RedisURL, ","), Username: user, Password: pass, TLSConfig: tlsConf,
			PoolSize: s.RedisPoolSize, DialTimeout: s.RedisTimeout, ReadTimeout: s.RedisTimeout, WriteTimeout: s.RedisTimeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, MaxRedirects: 3,
		})
	default:
		return nil, fmt.Errorf("REDIS_TYPE=%q: not SINGLE, SENTINEL or CLUSTER", s.RedisType)
	}
	var nopts []redisstore.Option
	if s.Batch == 0 {
		nopts = append(nopts, redisstore.WithoutBatching())
	}
	ns, err := redisstore.New(client, nopts...)
	if err != nil {
		client.Close()
		return nil, err
	}
	// envoy's counting publishes its resets where ratekit's store watches
	cs, err := compat.New(client, compat.Options{Batch: s.Batch, Watch: ns.WatchResets})
	if err != nil {
		ns.Close()
		client.Close()
		return nil, err
	}
	return &Stores{Client: client, Compat: cs, Native: ns}, nil
}

func splitAuth(auth string) (user, pass string) {
	if u, p, ok := strings.Cut(auth, ":"); ok {
		return u, p
	}
	return "", auth
}

func tlsConfig(s settings.Settings) (*tls.Config, error) {
	if !s.RedisTLS {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.RedisTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.RedisTLSCert, s.RedisTLSKey)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CLIENT_CERT/KEY: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if s.RedisTLSCACert != "" {
		pem, err := os.ReadFile(s.RedisTLSCACert)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CACERT: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("REDIS_TLS_CACERT=%s holds no certificate", s.RedisTLSCACert)
		}
		c.RootCAs = pool
	}
	if s.RedisTLSSkipVerify {
		// crypto/tls cannot check the chain without the name: its own
		// check is turned off and done here, the chain against the same
		// roots (REDIS_TLS_CACERT, or the system's), the name alone left out
		c.InsecureSkipVerify = true // #nosec G402 -- VerifyConnection checks the chain
		c.VerifyConnection = verifyChain(c.RootCAs)
	}
	return c, nil
}

// verifyChain returns a VerifyConnection that checks the server's
// certificate chain up to roots (nil: the system's) for server
// authentication, whatever name it is for.
func verifyChain(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("redis: TLS: the server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
			Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Errorf("redis: TLS (host name not checked, as REDIS_TLS_SKIP_HOSTNAME_VERIFICATION asks): %w", err)
		}
		return nil
	}
}
