//go:build linux

package gatewaytest

import (
	"net"
	"os/exec"
)

// StartRedis starts a redis-server on a free loopback port, keeping
// nothing on disk, for programs that are not tests (the tests use
// internal/redistest).
func StartRedis(dir string) (*Proc, error) {
	addr, err := FreePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	p := &Proc{Name: "redis-server", Addr: addr}
	if err := p.start(cmd); err != nil {
		return nil, err
	}
	return p, nil
}
