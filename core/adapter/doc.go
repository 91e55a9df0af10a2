// Package adapter holds what the rate-limiting middleware of every web
// framework shares, for people writing an adapter for a framework that
// ratekit does not cover yet. Applications need it only for the constants
// that adapters' options take ([HeadersLegacy], [NoIdentity401]).
//
// An adapter does three things, and holds no limiting logic of its own:
//
//  1. It wraps the framework's request in a [core.Request], without
//     converting it to net/http: the request's context (the one that
//     reaches the store), method, path, matched route pattern, headers,
//     query and socket peer address. [HTTPRequest] does this for a
//     net/http request.
//  2. It calls [Middleware.Handle], made once by [New] (or [Build]) from a
//     [core.Limiter], the rules and a [Config], and gets an [Outcome]: the
//     status to answer with (0 to proceed), the decision, the response
//     header fields and a default problem+json body.
//  3. It copies [Outcome.Headers] onto the response, whatever it is, then
//     calls the next handler or writes the answer, or hands over to the
//     application's denied or error handler. When the middleware has rules
//     that count only some answers ([Middleware.Counting]), a [Tally]
//     follows the answer instead: it learns the answer's status when the
//     status goes out, gives the header fields that go with it, and
//     reports the status when the request ends.
//
// Its options are an alias of [Option] over an unexported hooks type, so
// that they are sealed to its package; [WithHeaders], [WithIETFDraft],
// [WithFailClosedStatus] and [WithNoIdentity] give it the shared ones,
// [WithHook] its own, and [Apply] applies them all. The module's adapters
// are built this way, each about a hundred lines: nethttp (net/http, chi,
// gorilla/mux), ginlimit (Gin), echolimit and echo5limit (Echo v4 and
// v5), fiberlimit and fiber3limit (Fiber v2 and v3), and grpclimit
// (gRPC's unary and stream interceptors). The test suite in
// internal/adaptertest proves each against the behaviour they share.
package adapter
