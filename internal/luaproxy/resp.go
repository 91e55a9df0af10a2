package luaproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// kind is the type of a RESP2 value.
type kind byte

const (
	kindInt    kind = ':'
	kindBulk   kind = '$'
	kindStatus kind = '+'
	kindError  kind = '-'
	kindArray  kind = '*'
	kindNil    kind = 'n' // a null bulk string or array
)

// value is one RESP2 value.
type value struct {
	kind  kind
	n     int64
	s     []byte
	items []value
}

var errProtocol = errors.New("luaproxy: protocol error")

// readValue reads one RESP2 value from r and returns it with its bytes.
func readValue(r *bufio.Reader) (value, []byte, error) {
	var raw bytes.Buffer
	v, err := readInto(r, &raw)
	return v, raw.Bytes(), err
}

func readInto(r *bufio.Reader, raw *bytes.Buffer) (value, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return value{}, err
	}
	raw.Write(line)
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return value{}, fmt.Errorf("%w: line %q", errProtocol, line)
	}
	body := line[1 : len(line)-2]
	switch kind(line[0]) {
	case kindStatus, kindError:
		return value{kind: kind(line[0]), s: body}, nil
	case kindInt:
		n, err := strconv.ParseInt(string(body), 10, 64)
		return value{kind: kindInt, n: n}, err
	case kindBulk:
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return value{}, err
		}
		if n < 0 {
			return value{kind: kindNil}, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return value{}, err
		}
		raw.Write(b)
		return value{kind: kindBulk, s: b[:n]}, nil
	case kindArray:
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return value{}, err
		}
		if n < 0 {
			return value{kind: kindNil}, nil
		}
		v := value{kind: kindArray, items: make([]value, n)}
		for i := range v.items {
			if v.items[i], err = readInto(r, raw); err != nil {
				return value{}, err
			}
		}
		return v, nil
	}
	return value{}, fmt.Errorf("%w: type %q", errProtocol, line[0])
}

// appendRESP appends v to b in RESP2.
func appendRESP(b []byte, v value) []byte {
	switch v.kind {
	case kindInt:
		b = append(b, ':')
		b = strconv.AppendInt(b, v.n, 10)
		return append(b, '\r', '\n')
	case kindBulk:
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(v.s)), 10)
		b = append(b, '\r', '\n')
		b = append(b, v.s...)
		return append(b, '\r', '\n')
	case kindStatus, kindError:
		b = append(b, byte(v.kind))
		b = append(b, bytes.ReplaceAll(bytes.ReplaceAll(v.s, []byte("\r"), []byte(" ")), []byte("\n"), []byte(" "))...)
		return append(b, '\r', '\n')
	case kindArray:
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(len(v.items)), 10)
		b = append(b, '\r', '\n')
		for _, it := range v.items {
			b = appendRESP(b, it)
		}
		return b
	}
	return append(b, "$-1\r\n"...)
}

// command returns the RESP2 array of bulk strings args.
func command(args ...[]byte) []byte {
	v := value{kind: kindArray, items: make([]value, len(args))}
	for i, a := range args {
		v.items[i] = value{kind: kindBulk, s: a}
	}
	return appendRESP(nil, v)
}

// The runner's encoding of a value (see runner.lua).

func writeLua(w *bufio.Writer, v value) {
	switch v.kind {
	case kindInt:
		fmt.Fprintf(w, "i%d\n", v.n)
	case kindBulk:
		fmt.Fprintf(w, "s%d\n", len(v.s))
		w.Write(v.s)
	case kindStatus:
		fmt.Fprintf(w, "o%d\n", len(v.s))
		w.Write(v.s)
	case kindError:
		fmt.Fprintf(w, "e%d\n", len(v.s))
		w.Write(v.s)
	case kindArray:
		fmt.Fprintf(w, "a%d\n", len(v.items))
		for _, it := range v.items {
			writeLua(w, it)
		}
	default:
		w.WriteString("n\n")
	}
}

func readLua(r *bufio.Reader) (value, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return value{}, err
	}
	t, rest := line[0], line[1:len(line)-1]
	switch t {
	case 'n':
		return value{kind: kindNil}, nil
	case 'i':
		n, err := strconv.ParseInt(rest, 10, 64)
		return value{kind: kindInt, n: n}, err
	case 's', 'o', 'e':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return value{}, err
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return value{}, err
		}
		k := map[byte]kind{'s': kindBulk, 'o': kindStatus, 'e': kindError}[t]
		return value{kind: k, s: b}, nil
	case 'a':
		n, err := strconv.Atoi(rest)
		if err != nil {
			return value{}, err
		}
		v := value{kind: kindArray, items: make([]value, n)}
		for i := range v.items {
			if v.items[i], err = readLua(r); err != nil {
				return value{}, err
			}
		}
		return v, nil
	}
	return value{}, fmt.Errorf("%w: runner sent %q", errProtocol, line)
}
