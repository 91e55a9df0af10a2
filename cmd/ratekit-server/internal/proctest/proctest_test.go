//go:build linux

package proctest

import (
	"context"
	"net"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFreePortsDistinct(t *testing.T) {
	addrs, err := FreePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s picked twice", a)
		}
		seen[a] = true
	}
}

// listenReusePort listens on addr with SO_REUSEPORT, as envoy's service
// binds its ports.
func listenReusePort(t *testing.T, addr string) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A port two processes bound with SO_REUSEPORT counts two listeners, which
// AwaitHealthy refuses; a port bound once counts one, a free port none.
func TestListenersCountsSharedPorts(t *testing.T) {
	shared := listenReusePort(t, "127.0.0.1:0").Addr().String()
	listenReusePort(t, shared)
	single, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	free, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := listeners(shared, single.Addr().String(), free)
	if err != nil {
		t.Fatal(err)
	}
	if counts[shared] != 2 || counts[single.Addr().String()] != 1 || counts[free] != 0 {
		t.Errorf("listeners: %v; want 2 on %s, 1 on %s, 0 on %s", counts, shared, single.Addr(), free)
	}
	if _, err := listeners("localhost"); err == nil {
		t.Error("listeners of an address without a port: no error")
	}
}
