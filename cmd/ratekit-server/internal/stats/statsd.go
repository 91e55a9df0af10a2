package stats

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Flusher sends what the counters gained since the last flush, every
// interval, as envoy's statsd sink does (USE_STATSD): one
// "name:delta|c" line per counter that moved, over TCP. Without an address
// it logs them at Debug instead, as envoy's stdout sink does. Its
// goroutine runs until Close.
type Flusher struct {
	s        *Stats
	addr     string
	interval time.Duration
	log      *slog.Logger
	last     map[string]uint64
	conn     net.Conn
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// NewFlusher starts flushing s to addr (host:port; "" to log) every
// interval.
func NewFlusher(s *Stats, addr string, interval time.Duration, log *slog.Logger) *Flusher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Flusher{s: s, addr: addr, interval: interval, log: log, last: map[string]uint64{}, stop: cancel}
	f.done.Add(1)
	go f.run(ctx)
	return f
}

func (f *Flusher) run(ctx context.Context) {
	defer f.done.Done()
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.flush()
			if f.conn != nil {
				f.conn.Close()
			}
			return
		case <-t.C:
			f.flush()
		}
	}
}

// Close flushes once more and stops.
func (f *Flusher) Close() error {
	f.stop()
	f.done.Wait()
	return nil
}

// lines returns "name:delta|c" for every counter that moved.
func (f *Flusher) lines() []string {
	var out []string
	add := func(name string, c *Counter) {
		v := c.Value()
		if d := v - f.last[name]; d > 0 {
			out = append(out, fmt.Sprintf("%s:%d|c\n", name, d))
			f.last[name] = v
		}
	}
	f.s.each(func(r *Rule) {
		for _, n := range r.counters() {
			add("ratelimit.service.rate_limit."+r.Key+"."+n.suffix, n.c)
		}
	})
	add("ratelimit.service.config_load_success", &f.s.ConfigLoadSuccess)
	add("ratelimit.service.config_load_error", &f.s.ConfigLoadError)
	add("ratelimit.service.global_shadow_mode", &f.s.GlobalShadowMode)
	add("ratelimit.service.call.should_rate_limit.service_error", &f.s.ServiceError)
	add("ratelimit.service.call.should_rate_limit.redis_error", &f.s.RedisError)
	add("ratelimit_server.ShouldRateLimit.total_requests", &f.s.TotalRequests)
	return out
}

func (f *Flusher) flush() {
	lines := f.lines()
	if len(lines) == 0 {
		return
	}
	if f.addr == "" {
		for _, l := range lines {
			f.log.Debug("stat", "line", l[:len(l)-1])
		}
		return
	}
	if f.conn == nil {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err != nil {
			f.log.Warn("statsd unreachable; these statistics are dropped", "addr", f.addr, "error", err)
			return
		}
		f.conn = c
	}
	_ = f.conn.SetWriteDeadline(time.Now().Add(time.Second))
	w := bufio.NewWriter(f.conn)
	for _, l := range lines {
		_, _ = w.WriteString(l)
	}
	if err := w.Flush(); err != nil {
		f.log.Warn("statsd write failed; these statistics are dropped", "addr", f.addr, "error", err)
		f.conn.Close()
		f.conn = nil
	}
}
