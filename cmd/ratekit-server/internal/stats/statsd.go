package stats

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
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
	last     [7]uint64 // the service's counters as last sent
	conn     net.Conn
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// NewFlusher starts flushing s to addr (host:port; "" to log) every
// interval.
func NewFlusher(s *Stats, addr string, interval time.Duration, log *slog.Logger) *Flusher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Flusher{s: s, addr: addr, interval: interval, log: log, stop: cancel}
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

// lines returns "name:delta|c" for every counter that moved. What was
// last sent is kept per counter, beside it: a rule's in the rule, which
// leaves with it when the statistics drop an idle key; no name is kept.
func (f *Flusher) lines() []string {
	var out []string
	add := func(last *uint64, c *Counter, name ...string) {
		v := c.Value()
		if d := v - *last; d > 0 {
			out = append(out, strings.Join(name, "")+":"+strconv.FormatUint(d, 10)+"|c\n")
			*last = v
		}
	}
	f.s.each(func(r *Rule) {
		for i, n := range r.counters() {
			add(&r.flushed[i], n.c, "ratelimit.service.rate_limit.", r.Key, ".", n.suffix)
		}
	})
	add(&f.last[0], &f.s.ConfigLoadSuccess, "ratelimit.service.config_load_success")
	add(&f.last[1], &f.s.ConfigLoadError, "ratelimit.service.config_load_error")
	add(&f.last[2], &f.s.GlobalShadowMode, "ratelimit.service.global_shadow_mode")
	add(&f.last[3], &f.s.ServiceError, "ratelimit.service.call.should_rate_limit.service_error")
	add(&f.last[4], &f.s.RedisError, "ratelimit.service.call.should_rate_limit.redis_error")
	add(&f.last[5], &f.s.TotalRequests, "ratelimit_server.ShouldRateLimit.total_requests")
	add(&f.last[6], &f.s.RedisReadOnly, "ratelimit.redis_pool.readonly_error")
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
