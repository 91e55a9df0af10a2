package redisstore

import (
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
)

func TestRedisVersion(t *testing.T) {
	for info, want := range map[string][2]int{
		"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n": {7, 0},
		"# Server\r\nredis_version:6.2.0\r\n":                           {6, 2},
		"redis_version:5.0.14\r\n":                                      {5, 0},
	} {
		if got, ok := redisVersion(info); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", info, got, ok, want)
		}
	}
	if _, ok := redisVersion("# Clients\r\nconnected_clients:1\r\n"); ok {
		t.Error("a reply without redis_version read as a version")
	}
}

// TestNewRefusesAnOldServer serves INFO server as Redis 6.0 would: New
// refuses it, naming the version. A 6.2 server passes, and so does
// miniredis, which answers no server section.
func TestNewRefusesAnOldServer(t *testing.T) {
	for version, refused := range map[string]bool{"6.0.16": true, "6.2.0": false, "7.2.4": false} {
		srv, err := server.NewServer("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv.Register("INFO", func(c *server.Peer, cmd string, args []string) {
			c.WriteBulk("# Server\r\nredis_version:" + version + "\r\n")
		})
		srv.Register("HELLO", func(c *server.Peer, cmd string, args []string) { c.WriteError("ERR unknown command 'HELLO'") })
		srv.Register("CLIENT", func(c *server.Peer, cmd string, args []string) { c.WriteOK() })
		c := redis.NewClient(&redis.Options{Addr: srv.Addr().String(), Protocol: 2})
		_, err = New(c)
		if refused != errors.Is(err, ErrServerTooOld) {
			t.Errorf("redis_version %s: New: %v, want refused %v", version, err, refused)
		}
		c.Close()
		srv.Close()
	}
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	if _, err := New(c); err != nil {
		t.Errorf("miniredis: %v", err)
	}
}
