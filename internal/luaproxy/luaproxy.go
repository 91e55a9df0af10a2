// Package luaproxy is a Redis look-alike for tests whose scripts run on
// Lua 5.4 and may touch only the keys they declare, as Dragonfly's do.
//
// A [Proxy] listens on a free port of 127.0.0.1 and passes every command
// to a real redis-server (or valkey-server), except scripts: EVAL, EVALSHA
// and SCRIPT LOAD it runs itself, in a lua5.4 process (Debian's package
// lua5.4), one script at a time while no other command runs, so that a
// script is as atomic as on a server. Each redis.call and redis.pcall of a
// script goes to the real server, after the server's own COMMAND GETKEYS
// has named its keys.
//
// A script runs in an environment of only what Lua 5.1 (Redis, Valkey) and
// Lua 5.4 both give a script, plus Redis's redis and struct libraries:
// reading a global that one of them lacks (5.1's unpack or table.maxn,
// 5.3's math.type) fails the script, and so does writing any global. Its
// numbers are Lua 5.4's: an integer-valued float passed to redis.call is
// written "3.0", and string.format('%d') refuses a fraction. Every such
// failure, and every command of a script on a key not in its KEYS, is a
// violation: the test that started the proxy fails at its end, whatever
// the caller did with the error.
//
// Clients must speak RESP2: the proxy answers HELLO with an error, which
// go-redis takes as a server without RESP3. Scripts always run on
// database 0, and a script inside MULTI is a violation.
package luaproxy

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// binary is the Lua interpreter looked up on PATH.
const binary = "lua5.4"

//go:embed runner.lua
var runnerSrc []byte

// Require skips the test when lua5.4 is not on PATH, or fails it when the
// environment has CI=true.
func Require(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath(binary); err == nil {
		return
	}
	const msg = "luaproxy: lua5.4 not found on PATH; install it to run this test (Debian/Ubuntu: apt-get install lua5.4)"
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + " [CI=true: failing instead of skipping]")
	}
	tb.Skip(msg)
}

// Proxy is a running look-alike server. See the package documentation.
type Proxy struct {
	backend string
	ln      net.Listener

	// mu is held for writing while a script runs and for reading while
	// any other command does.
	mu     sync.RWMutex
	lua    *exec.Cmd
	luaIn  *bufio.Writer
	luaOut *bufio.Reader
	luaErr bytes.Buffer
	srv    net.Conn // the scripts' connection to the server
	srvIn  *bufio.Reader

	state      sync.Mutex
	scripts    map[string][]byte // SHA1 → source, of EVAL and SCRIPT LOAD
	ran        map[string]int    // source → runs
	violations []string
	conns      map[net.Conn]struct{}
	closed     bool
	wg         sync.WaitGroup
}

// Start starts a proxy in front of the server at backend ("host:port")
// and registers a cleanup on tb that stops it and fails tb with every
// violation seen. It calls [Require] first.
func Start(tb testing.TB, backend string) *Proxy {
	tb.Helper()
	Require(tb)
	dir := tb.TempDir()
	runner := filepath.Join(dir, "runner.lua")
	if err := os.WriteFile(runner, runnerSrc, 0o644); err != nil {
		tb.Fatalf("luaproxy: %v", err)
	}
	p := &Proxy{
		backend: backend,
		scripts: make(map[string][]byte),
		ran:     make(map[string]int),
		conns:   make(map[net.Conn]struct{}),
	}
	p.lua = exec.Command(binary, runner)
	p.lua.Stderr = &p.luaErr
	in, err := p.lua.StdinPipe()
	if err != nil {
		tb.Fatalf("luaproxy: %v", err)
	}
	out, err := p.lua.StdoutPipe()
	if err != nil {
		tb.Fatalf("luaproxy: %v", err)
	}
	if err := p.lua.Start(); err != nil {
		tb.Fatalf("luaproxy: starting %s: %v", binary, err)
	}
	p.luaIn, p.luaOut = bufio.NewWriter(in), bufio.NewReader(out)
	if p.srv, err = net.Dial("tcp", backend); err != nil {
		p.stop()
		tb.Fatalf("luaproxy: %v", err)
	}
	p.srvIn = bufio.NewReader(p.srv)
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		p.stop()
		tb.Fatalf("luaproxy: %v", err)
	}
	p.wg.Go(p.accept)
	tb.Cleanup(func() {
		p.stop()
		for _, v := range p.Violations() {
			tb.Errorf("luaproxy: %s", v)
		}
	})
	return p
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Ran returns the source of every script run so far, with its number of
// runs.
func (p *Proxy) Ran() map[string]int {
	p.state.Lock()
	defer p.state.Unlock()
	out := make(map[string]int, len(p.ran))
	for k, v := range p.ran {
		out[k] = v
	}
	return out
}

// Violations returns the violations seen so far.
func (p *Proxy) Violations() []string {
	p.state.Lock()
	defer p.state.Unlock()
	return append([]string(nil), p.violations...)
}

// violation records a violation once: a script that breaks a rule breaks it
// on every run.
func (p *Proxy) violation(format string, args ...any) {
	p.state.Lock()
	defer p.state.Unlock()
	v := fmt.Sprintf(format, args...)
	if !slices.Contains(p.violations, v) {
		p.violations = append(p.violations, v)
	}
}

// stop closes the listener and every connection, and kills lua5.4.
func (p *Proxy) stop() {
	p.state.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.state.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		p.srv.Close()
	}
	if p.lua.Process != nil {
		_ = p.lua.Process.Kill()
		_ = p.lua.Wait()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.state.Lock()
		if p.closed {
			p.state.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Go(func() { p.serve(c) })
		p.state.Unlock()
	}
}

// track registers c to be closed by stop; it reports false once stop has
// begun.
func (p *Proxy) track(c net.Conn) bool {
	p.state.Lock()
	defer p.state.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// serve answers one client connection, through a connection of its own to
// the server.
func (p *Proxy) serve(c net.Conn) {
	defer c.Close()
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	defer b.Close()
	if !p.track(b) {
		return
	}
	cr, cw, br := bufio.NewReader(c), bufio.NewWriter(c), bufio.NewReader(b)
	multi := false
	for {
		v, raw, err := readValue(cr)
		if err != nil {
			return
		}
		if v.kind != kindArray || len(v.items) == 0 {
			return
		}
		name := strings.ToUpper(string(v.items[0].s))
		args := v.items[1:]
		var reply []byte
		switch name {
		case "HELLO":
			reply = []byte("-ERR unknown command 'HELLO'\r\n")
		case "EVAL", "EVAL_RO", "EVALSHA", "EVALSHA_RO":
			if multi {
				p.violation("a script inside MULTI, which luaproxy does not run")
			}
			reply = p.eval(name, args)
		case "SCRIPT":
			reply = p.script(args, raw, b, br)
		case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE":
			// from here on the connection only subscribes and receives
			if _, err := b.Write(raw); err != nil {
				return
			}
			if err := cw.Flush(); err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, br); c.Close() }()
			_, _ = io.Copy(b, cr)
			return
		default:
			switch name {
			case "MULTI":
				multi = true
			case "EXEC", "DISCARD":
				multi = false
			}
			if reply, err = p.forward(raw, b, br); err != nil {
				return
			}
		}
		if _, err := cw.Write(reply); err != nil {
			return
		}
		if cr.Buffered() == 0 {
			if err := cw.Flush(); err != nil {
				return
			}
		}
	}
}

// forward sends a command to the server on b and returns its reply.
func (p *Proxy) forward(raw []byte, b net.Conn, br *bufio.Reader) ([]byte, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if _, err := b.Write(raw); err != nil {
		return nil, err
	}
	_, reply, err := readValue(br)
	return reply, err
}

func sha1hex(src []byte) string {
	h := sha1.Sum(src)
	return hex.EncodeToString(h[:])
}

func errorReply(format string, args ...any) []byte {
	return appendRESP(nil, value{kind: kindError, s: fmt.Appendf(nil, format, args...)})
}

// script answers SCRIPT LOAD, EXISTS and FLUSH itself, and passes on the
// other subcommands.
func (p *Proxy) script(args []value, raw []byte, b net.Conn, br *bufio.Reader) []byte {
	if len(args) == 0 {
		return errorReply("ERR wrong number of arguments for 'script' command")
	}
	switch strings.ToUpper(string(args[0].s)) {
	case "LOAD":
		if len(args) != 2 {
			return errorReply("ERR wrong number of arguments for 'script|load' command")
		}
		sha := sha1hex(args[1].s)
		p.state.Lock()
		p.scripts[sha] = bytes.Clone(args[1].s)
		p.state.Unlock()
		return appendRESP(nil, value{kind: kindBulk, s: []byte(sha)})
	case "EXISTS":
		out := value{kind: kindArray}
		p.state.Lock()
		for _, a := range args[1:] {
			_, ok := p.scripts[strings.ToLower(string(a.s))]
			out.items = append(out.items, value{kind: kindInt, n: map[bool]int64{true: 1}[ok]})
		}
		p.state.Unlock()
		return appendRESP(nil, out)
	case "FLUSH":
		p.state.Lock()
		clear(p.scripts)
		p.state.Unlock()
		return []byte("+OK\r\n")
	}
	reply, err := p.forward(raw, b, br)
	if err != nil {
		return errorReply("ERR luaproxy: %v", err)
	}
	return reply
}

// eval runs a script of EVAL or EVALSHA.
func (p *Proxy) eval(name string, args []value) []byte {
	if len(args) < 2 {
		return errorReply("ERR wrong number of arguments for '%s' command", strings.ToLower(name))
	}
	var src []byte
	var sha string
	if strings.HasPrefix(name, "EVALSHA") {
		sha = strings.ToLower(string(args[0].s))
		p.state.Lock()
		src = p.scripts[sha]
		p.state.Unlock()
		if src == nil {
			return []byte("-NOSCRIPT No matching script. Please use EVAL.\r\n")
		}
	} else {
		src = bytes.Clone(args[0].s)
		sha = sha1hex(src)
		p.state.Lock()
		p.scripts[sha] = src
		p.state.Unlock()
	}
	n, err := strconv.Atoi(string(args[1].s))
	if err != nil || n < 0 || 2+n > len(args) {
		return errorReply("ERR Number of keys can't be greater than number of args")
	}
	keys, argv := args[2:2+n], args[2+n:]
	p.state.Lock()
	p.ran[string(src)]++
	p.state.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	reply, err := p.run(sha, src, keys, argv)
	if err != nil {
		p.violation("running a script: %v; lua5.4 said: %s", err, p.luaErr.String())
		return errorReply("ERR luaproxy: %v", err)
	}
	return reply
}

var errorLine = regexp.MustCompile(`user_script:(\d+):`)

// run runs one script in lua5.4. The caller holds p.mu for writing.
func (p *Proxy) run(sha string, src []byte, keys, argv []value) ([]byte, error) {
	msg := value{kind: kindArray, items: []value{
		{kind: kindBulk, s: []byte(sha)},
		{kind: kindBulk, s: src},
		{kind: kindArray, items: keys},
		{kind: kindArray, items: argv},
	}}
	writeLua(p.luaIn, msg)
	if err := p.luaIn.Flush(); err != nil {
		return nil, err
	}
	declared := make(map[string]bool, len(keys))
	for _, k := range keys {
		declared[string(k.s)] = true
	}
	for {
		m, err := readLua(p.luaOut)
		if err != nil {
			return nil, err
		}
		if m.kind != kindArray || len(m.items) == 0 {
			return nil, fmt.Errorf("%w: runner sent %v", errProtocol, m)
		}
		switch string(m.items[0].s) {
		case "call", "pcall":
			cmd := make([][]byte, len(m.items)-1)
			for i, it := range m.items[1:] {
				cmd[i] = it.s
			}
			reply, err := p.serverCommand(sha, src, declared, cmd)
			if err != nil {
				return nil, err
			}
			writeLua(p.luaIn, reply)
			if err := p.luaIn.Flush(); err != nil {
				return nil, err
			}
		case "return":
			if len(m.items) != 2 {
				return nil, fmt.Errorf("%w: runner returned %d values", errProtocol, len(m.items)-1)
			}
			return appendRESP(nil, m.items[1]), nil
		case "fail":
			text := string(m.items[1].s)
			// a script that fails on Lua 5.4 where it runs on Redis
			p.violation("script %s failed: %s%s", sha[:12], text, sourceLine(src, text))
			return errorReply("ERR user_script: %s", text), nil
		default:
			return nil, fmt.Errorf("%w: runner sent %q", errProtocol, m.items[0].s)
		}
	}
}

// sourceLine returns the line of src that an error message names.
func sourceLine(src []byte, msg string) string {
	m := errorLine.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(src), "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return fmt.Sprintf("\n\tline %d: %s", n, strings.TrimSpace(lines[n-1]))
}

// serverCommand runs one command of a script on the server, after
// checking with COMMAND GETKEYS that its keys are declared.
func (p *Proxy) serverCommand(sha string, src []byte, declared map[string]bool, cmd [][]byte) (value, error) {
	if len(cmd) > 0 {
		getkeys := append([][]byte{[]byte("COMMAND"), []byte("GETKEYS")}, cmd...)
		keys, err := p.roundTrip(getkeys)
		if err != nil {
			return value{}, err
		}
		// an error reply: a command without keys (TIME), or one the server
		// refuses, which it refuses again below
		if keys.kind == kindArray {
			for _, k := range keys.items {
				if !declared[string(k.s)] {
					p.violation("script %s: %s touches key %q, not in KEYS%s", sha[:12], strings.ToUpper(string(cmd[0])), k.s, firstLine(src))
				}
			}
		}
	}
	return p.roundTrip(cmd)
}

func firstLine(src []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(src)), "\n")
	return "\n\tscript begins: " + line
}

// roundTrip sends cmd on the scripts' connection and reads its reply. The
// caller holds p.mu for writing.
func (p *Proxy) roundTrip(cmd [][]byte) (value, error) {
	if _, err := p.srv.Write(command(cmd...)); err != nil {
		return value{}, err
	}
	v, _, err := readValue(p.srvIn)
	if err != nil {
		return value{}, errors.Join(errors.New("luaproxy: reading the server's reply"), err)
	}
	return v, nil
}

// RequireRan fails tb for each file *.lua of dir whose text no script
// run so far contained: a script the test did not drive was not checked.
func (p *Proxy) RequireRan(tb testing.TB, dir string) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("luaproxy: no scripts in %s: %v", dir, err)
	}
	ran := p.Ran()
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		found := false
		for s := range ran {
			if strings.Contains(s, string(src)) {
				found = true
				break
			}
		}
		if !found {
			tb.Errorf("luaproxy: %s never ran", f)
		}
	}
}
