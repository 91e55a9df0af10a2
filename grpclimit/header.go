package grpclimit

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ratekit/ratekit/core/adapter"
)

// pending holds the rate-limit fields of one call until they are sent. The
// outermost interceptor of this package in a chain makes it and installs
// it as the call's transport stream, where inner ones find it and merge
// their fields into it ([adapter.Headers.Set]). The fields are sent once:
// before the handler sends its own header or first message, or when the
// outermost interceptor returns, before the response or status goes out.
type pending struct {
	grpc.ServerTransportStream // the call's own; nil outside a server

	mu     sync.Mutex
	sent   bool
	n      int
	fields [6]adapter.Header // at most the fields of one Headers
}

// begin returns the context of a call that an interceptor decides, the
// pending fields of the call, and whether the interceptor owns them (it is
// the outermost of this package) and must flush them.
func begin(ctx context.Context) (context.Context, *pending, bool) {
	ts := grpc.ServerTransportStreamFromContext(ctx)
	if p, ok := ts.(*pending); ok {
		return ctx, p, false
	}
	p := &pending{ServerTransportStream: ts}
	if ts != nil {
		ctx = grpc.NewContextWithServerTransportStream(ctx, p)
	}
	return ctx, p, true
}

// Get implements adapter.ResponseHeader: the value of a field set so far,
// by its canonical name.
func (p *pending) Get(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.fields[:p.n] {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Set implements adapter.ResponseHeader. Fields set once the metadata is
// sent are dropped.
func (p *pending) Set(name, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.fields[:p.n] {
		if f.Name == name {
			p.fields[i].Value = value
			return
		}
	}
	if p.n < len(p.fields) {
		p.fields[p.n] = adapter.Header{Name: name, Value: value}
		p.n++
	}
}

// flush sends the fields as header metadata, once. The stream reports an
// error only when the header has gone already, or the call has ended:
// then there is nothing left to tell the client.
func (p *pending) flush() {
	p.mu.Lock()
	if p.sent || p.n == 0 || p.ServerTransportStream == nil {
		p.sent = true
		p.mu.Unlock()
		return
	}
	p.sent = true
	md := make(metadata.MD, p.n)
	for _, f := range p.fields[:p.n] {
		md[metadataKey(f.Name)] = []string{f.Value}
	}
	p.mu.Unlock()
	_ = p.ServerTransportStream.SetHeader(md)
}

// SendHeader sends the rate-limit fields with the handler's own, for
// handlers that call grpc.SendHeader.
func (p *pending) SendHeader(md metadata.MD) error {
	p.flush()
	return p.ServerTransportStream.SendHeader(md)
}

// metadataKey returns the metadata key of a header field: its name in lower
// case.
func metadataKey(name string) string {
	switch name {
	case adapter.HeaderLimit:
		return "x-ratelimit-limit"
	case adapter.HeaderRemaining:
		return "x-ratelimit-remaining"
	case adapter.HeaderReset:
		return "x-ratelimit-reset"
	case adapter.HeaderPolicy:
		return "ratelimit-policy"
	case adapter.HeaderRateLimit:
		return "ratelimit"
	case adapter.HeaderRetryAfter:
		return "retry-after"
	}
	return strings.ToLower(name)
}

// serverStream is a stream whose rate-limit fields go out before its
// handler's header or first message.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
	p   *pending
}

func (s *serverStream) Context() context.Context { return s.ctx }

func (s *serverStream) SendHeader(md metadata.MD) error {
	s.p.flush()
	return s.ServerStream.SendHeader(md)
}

func (s *serverStream) SendMsg(m any) error {
	s.p.flush()
	return s.ServerStream.SendMsg(m)
}
