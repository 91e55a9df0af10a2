//go:build linux

// Package gatewaytest runs real gateways, Debian's nginx and Caddy, and
// Traefik built from its Go module (pinned in traefik/go.mod), as
// processes on loopback, in front of an upstream and limited by
// ratekit-server replicas through forward auth (GET /check), with the
// configurations of the guides (docs/gateways-nginx.md,
// docs/gateways-caddy-forward-auth.md, docs/gateways-traefik.md) read from
// the guides themselves, so that the guides stay true. Its tests check
// the limits through the gateways; cmd/speed measures them with wrk.
package gatewaytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// BuildServer builds ratekit-server into dir and returns the binary's path.
// race adds the race detector.
func BuildServer(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "ratekit-server")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = filepath.Join(Root(), "cmd", "ratekit-server")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ratekit-server: %v\n%s", err, out)
	}
	return bin, nil
}

// Guide returns the text of docs/name.
func Guide(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(Root(), "docs", name))
	return string(b), err
}

// Block returns the fenced block that follows the line
// "<!-- gatewaytest:name -->" in doc, without its fences.
func Block(doc, name string) (string, error) {
	marker := "<!-- gatewaytest:" + name + " -->\n"
	i := strings.Index(doc, marker)
	if i < 0 {
		return "", fmt.Errorf("no %q marker", strings.TrimSpace(marker))
	}
	rest := doc[i+len(marker):]
	if !strings.HasPrefix(rest, "```") {
		return "", fmt.Errorf("%s: the marker is not followed by a fenced block", name)
	}
	rest = rest[strings.IndexByte(rest, '\n')+1:]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		return "", fmt.Errorf("%s: the block has no end", name)
	}
	return rest[:end+1], nil
}

// Substitute replaces, in s, each old string of pairs (old, new, old,
// new...) with its new one, and returns an error if one does not occur:
// the guides' example addresses become the test's.
func Substitute(s string, pairs ...string) (string, error) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			return "", fmt.Errorf("%q does not occur", pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s, nil
}

// FreePort returns a loopback address whose port is free now: see
// [proctest.FreePorts] for several distinct ones.
func FreePort() (string, error) { return proctest.FreePort() }

// Seen is a request as the upstream received it.
type Seen struct {
	Method, URI, Host string
	Header            http.Header
	BodyLen           int
	BodySHA256        string
}

// Upstream is the application behind the gateways: it answers 200 "ok"
// (403 on /forbidden) and records every request it gets.
type Upstream struct {
	*httptest.Server
	hits   atomic.Int64
	record atomic.Bool
	mu     sync.Mutex
	seen   []Seen
}

// NewUpstream starts an upstream on loopback; record keeps every request
// (off for benchmarks).
func NewUpstream(record bool) *Upstream {
	u := &Upstream{}
	u.record.Store(record)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if u.record.Load() {
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			u.mu.Lock()
			u.seen = append(u.seen, Seen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), BodyLen: int(n), BodySHA256: hex.EncodeToString(h.Sum(nil))})
			u.mu.Unlock()
		}
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/forbidden" {
			// the app's own 403, which a gateway must not take for a denial
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, "the app says no\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	return u
}

// Addr is the upstream's host:port.
func (u *Upstream) Addr() string { return u.Listener.Addr().String() }

// Hits is how many requests reached the upstream.
func (u *Upstream) Hits() int64 { return u.hits.Load() }

// Seen returns the requests recorded so far.
func (u *Upstream) Seen() []Seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Seen(nil), u.seen...)
}

// Proc is a gateway process.
type Proc struct {
	Name string
	Addr string // where it listens
	cmd  *exec.Cmd
	out  bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
	logs []string // files it writes its log to
}

func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// start runs cmd and waits until p.Addr accepts connections.
func (p *Proc) start(cmd *exec.Cmd) error {
	p.cmd, p.done = cmd, make(chan struct{})
	cmd.Stdout, cmd.Stderr = p, p
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v): %s", p.Name, cmd.ProcessState, p.Log())
		default:
		}
		if c, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop()
	return fmt.Errorf("%s does not listen on %s: %s", p.Name, p.Addr, p.Log())
}

// Log returns what the process wrote, and its log files.
func (p *Proc) Log() string {
	p.mu.Lock()
	s := p.out.String()
	p.mu.Unlock()
	for _, f := range p.logs {
		b, _ := os.ReadFile(f)
		s += "\n--- " + filepath.Base(f) + "\n" + string(b)
	}
	return s
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop kills the process (and, for nginx, its workers: their parent's
// death kills them) and waits for it.
func (p *Proc) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// ErrMissing is returned when a gateway's binary is not installed.
var ErrMissing = errors.New("not installed")

// Look returns the path of a gateway's binary, or an error wrapping
// ErrMissing.
func Look(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if _, e := os.Stat(filepath.Join(dir, name)); e == nil {
				return filepath.Join(dir, name), nil
			}
		}
		return "", fmt.Errorf("%s: %w (apt-get install %s)", name, ErrMissing, name)
	}
	return p, nil
}
