// Package netdelay puts a network between a benchmark's clients and its
// redis-server: an in-process toxiproxy proxy that holds every byte for a
// fixed time in each direction, as a link of that one-way latency would.
//
// toxiproxy's own latency toxic counts in milliseconds; a network between
// an application and its Redis in one data centre is a few hundred
// microseconds each way, so this package registers a toxic of its own,
// "latency_us", whose latency is in microseconds.
package netdelay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// ToxicType is the name of the microsecond latency toxic in toxiproxy's
// registry.
const ToxicType = "latency_us"

func init() { toxics.Register(ToxicType, new(Toxic)) }

// Toxic passes data through Latency microseconds after it was read: each
// chunk waits until its own read time plus the latency, so chunks read
// close together leave close together, and a pipeline of requests keeps
// its throughput, as on a real link.
type Toxic struct {
	Latency int64 `json:"latency"` // µs
}

// GetBufferSize lets up to 1024 chunks wait at once, so that the reader is
// not held up behind one that is waiting.
func (t *Toxic) GetBufferSize() int { return 1024 }

// Pipe forwards stub's chunks, each once its time has come, until the
// input ends or toxiproxy interrupts it.
func (t *Toxic) Pipe(stub *toxics.ToxicStub) { t.pipe(stub, sharedLine()) }

func (t *Toxic) pipe(stub *toxics.ToxicStub, line *delayLine) {
	delay := time.Duration(t.Latency) * time.Microsecond
	wake := make(chan struct{}, 1) // this link's: one chunk waits at a time
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			line.wait(c.Timestamp.Add(delay), wake)
			stub.Output <- c
		}
	}
}

// Proxy is a running toxiproxy proxy with the latency toxic on both
// directions.
type Proxy struct {
	p *toxiproxy.Proxy
}

// Start starts a proxy on a free loopback port to upstream that delays
// every byte by latency (rounded down to the microsecond) each way.
func Start(upstream string, latency time.Duration) (*Proxy, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netdelay: starting the proxy: %w", err)
	}
	for _, stream := range []string{"upstream", "downstream"} {
		b, err := json.Marshal(map[string]any{
			"name": "latency_" + stream, "type": ToxicType, "stream": stream, "toxicity": 1,
			"attributes": Toxic{Latency: latency.Microseconds()},
		})
		if err != nil {
			p.Stop()
			return nil, err
		}
		if _, err := p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
			p.Stop()
			return nil, fmt.Errorf("netdelay: adding the %s latency: %w", stream, err)
		}
	}
	return &Proxy{p: p}, nil
}

// Addr is the host:port clients dial to reach upstream through the proxy.
func (p *Proxy) Addr() string { return p.p.Listen }

// Stop closes the proxy's listener and every connection through it.
func (p *Proxy) Stop() { p.p.Stop() }
