package netdelay

import (
	"container/heap"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

// Each chunk leaves once its read time plus the latency has come, in the
// order read; the end of the input closes the output.
func TestToxicHoldsEachChunkForTheLatency(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var mu sync.Mutex
	clock, slept := t0, []time.Time(nil)
	line := newDelayLine(
		func() time.Time { mu.Lock(); defer mu.Unlock(); return clock },
		func(until time.Time) { mu.Lock(); defer mu.Unlock(); clock, slept = until, append(slept, until) })
	go line.run() // parks for good once the test is done

	in := make(chan *stream.StreamChunk, 3)
	out := make(chan *stream.StreamChunk, 3)
	stub := toxics.NewToxicStub(in, out)
	in <- &stream.StreamChunk{Data: []byte("a"), Timestamp: t0}
	in <- &stream.StreamChunk{Data: []byte("b"), Timestamp: t0.Add(10 * time.Microsecond)}
	in <- nil
	(&Toxic{Latency: 250}).pipe(stub, line)

	want := []time.Time{t0.Add(250 * time.Microsecond), t0.Add(260 * time.Microsecond)}
	mu.Lock()
	defer mu.Unlock()
	if len(slept) != 2 || !slept[0].Equal(want[0]) || !slept[1].Equal(want[1]) {
		t.Errorf("slept until %v, want %v", slept, want)
	}
	var got string
	for c := range out {
		got += string(c.Data)
	}
	if got != "ab" {
		t.Errorf("forwarded %q, want \"ab\"", got)
	}
}

// The line sleeps until each due time in turn, the earliest first,
// whatever the order in which the waiters came.
func TestDelayLineWakesByDueTime(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var mu sync.Mutex
	clock, slept := t0, []time.Time(nil)
	line := newDelayLine(
		func() time.Time { mu.Lock(); defer mu.Unlock(); return clock },
		func(until time.Time) { mu.Lock(); defer mu.Unlock(); clock, slept = until, append(slept, until) })
	// both wait before the line runs
	var wg sync.WaitGroup
	for _, due := range []time.Duration{300, 200} {
		wake := make(chan struct{}, 1)
		line.mu.Lock()
		heap.Push(&line.waiting, waiter{t0.Add(due * time.Microsecond), wake})
		line.mu.Unlock()
		wg.Go(func() { <-wake })
	}
	go line.run() // parks for good once the test is done
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := []time.Time{t0.Add(200 * time.Microsecond), t0.Add(300 * time.Microsecond)}
	if len(slept) != 2 || !slept[0].Equal(want[0]) || !slept[1].Equal(want[1]) {
		t.Errorf("slept until %v, want %v", slept, want)
	}
}

// Through the proxy a client talks to the server as directly, with the
// toxic on both directions.
func TestProxyCarriesCommandsWithLatencyBothWays(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	p, err := Start(srv.Addr, 250*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	for _, s := range []string{"upstream", "downstream"} {
		w := p.p.Toxics.GetToxic("latency_" + s)
		if w == nil || w.Type != ToxicType || w.Toxicity != 1 {
			t.Fatalf("%s toxic: %+v", s, w)
		}
		if tx, ok := w.Toxic.(*Toxic); !ok || tx.Latency != 250 {
			t.Errorf("%s toxic: %#v, want a latency of 250µs", s, w.Toxic)
		}
	}
	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer client.Close()
	ctx := context.Background()
	if err := client.Set(ctx, "k", "through the proxy", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := client.Get(ctx, "k").Result(); err != nil || v != "through the proxy" {
		t.Errorf("GET = %q, %v", v, err)
	}
}
