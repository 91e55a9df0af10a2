package adaptertest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// AnswerStreamHeader, on a request to GET / of an app that [Harness.New]
// makes, asks the handler to stream its answer in place of "ok": that many
// lines, each reported with the adapter's AddCost once it is out
// ([StreamAnswer]).
const AnswerStreamHeader = "X-Answer-Stream"

// AnswerStreamPanicHeader, beside [AnswerStreamHeader], makes the handler
// panic with [ErrPanic] once that many lines of its stream are out.
const AnswerStreamPanicHeader = "X-Answer-Stream-Panic"

// StreamAnswer streams the answer that the request whose header reads as
// header asks for in [AnswerStreamHeader], if any, and reports whether it
// asked: each line goes out through write (which writes and flushes it),
// then counts one unit with addCost (the adapter's AddCost). It stops when
// ctx, the request's context, is done, as a server ends it when its client
// goes, or when a write fails; and it panics as [AnswerStreamPanicHeader]
// asks.
func StreamAnswer(ctx context.Context, header func(string) string, write func(line string) error, addCost func(n int)) bool {
	n, err := strconv.Atoi(header(AnswerStreamHeader))
	if err != nil {
		return false
	}
	panicAt, err := strconv.Atoi(header(AnswerStreamPanicHeader))
	if err != nil {
		panicAt = -1
	}
	for i := range n {
		if i == panicAt {
			panic(ErrPanic)
		}
		if ctx.Err() != nil || write(fmt.Sprintf("token %d\n", i)) != nil {
			return true
		}
		addCost(1)
		if h, ok := ctx.Value(hangUpKey{}).(*hangUp); ok && i+1 == h.after {
			h.cancel()
		}
	}
	return true
}

// hangUpKey keys a request's [hangUp] in its context.
type hangUpKey struct{}

// hangUp is a client that goes once it has read after lines of a stream:
// cancel ends the request's context, as a server does when the client
// goes.
type hangUp struct {
	after  int
	cancel context.CancelFunc
}

// getStreaming serves GET / from client, asking the handler to stream
// lines, one unit each. The client hangs up once it has read hangUpAfter
// of them (0: never); the handler panics once panicAt are out (0: never).
func getStreaming(app App, client string, lines, hangUpAfter, panicAt int) Response {
	r := NewRequest(http.MethodGet, "/", client)
	r.Header.Set(AnswerStreamHeader, strconv.Itoa(lines))
	if panicAt > 0 {
		r.Header.Set(AnswerStreamPanicHeader, strconv.Itoa(panicAt))
	}
	if hangUpAfter > 0 {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(context.WithValue(ctx, hangUpKey{}, &hangUp{after: hangUpAfter, cancel: cancel}))
	}
	return app(r)
}
