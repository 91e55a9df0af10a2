package redistest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The helpers in this file speak just enough RESP2 to administer the servers
// this package starts (PING, INFO, CONFIG, CLUSTER ...). They deliberately do
// not use go-redis: a go-redis client performs a connection handshake (HELLO,
// CLIENT SETINFO, ...) that would show up in INFO commandstats, retries on its
// own and keeps pooled connections across Kill/Restart, all of which get in
// the way of precise, one-shot administrative requests.

// defaultAdminTimeout bounds an administrative request whose context has no
// deadline.
const defaultAdminTimeout = 5 * time.Second

// respError is an error reply ("-ERR ...") sent by the server.
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// do sends one command to addr on a fresh connection and returns its reply:
// a string for simple and bulk strings, an int64 for integers, []any for
// arrays and nil for null replies. An error reply is returned as an error of
// type respError.
func do(ctx context.Context, addr string, args ...string) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultAdminTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	// Closing the connection when ctx is cancelled unblocks reads and writes
	// before the deadline.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if _, err := conn.Write(encodeCommand(args)); err != nil {
		return nil, err
	}
	reply, err := readReply(bufio.NewReader(conn))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, err
	}
	if e, ok := reply.(respError); ok {
		return nil, e
	}
	return reply, nil
}

// doString is do for commands that reply with a (simple or bulk) string.
func doString(ctx context.Context, addr string, args ...string) (string, error) {
	reply, err := do(ctx, addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := reply.(string)
	if !ok {
		return "", fmt.Errorf("redis %s: unexpected reply %#v", strings.ToUpper(args[0]), reply)
	}
	return s, nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args []string) []byte {
	n := 16
	for _, a := range args {
		n += len(a) + 16
	}
	b := make([]byte, 0, n)
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readReply reads one RESP2 reply from r.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("malformed bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("malformed array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return items, nil
	default:
		return nil, fmt.Errorf("unsupported reply type %q", kind)
	}
}

// infoFields parses the output of INFO into a map of field -> value, skipping
// section headers and blank lines.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = v
		}
	}
	return fields
}
