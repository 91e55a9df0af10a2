package main

// The paths of this phase that the comparison is to measure beside the
// others: ratekit-server's gRPC path (cmd/ratekit-server, envoy's rate limit
// service over Limiters) and the outbound reservation (package outbound, a
// fleet-wide turn on a Redis schedule). Neither is on this tree's main
// branch yet; when one lands, its contender goes into contenders() (and
// networkNames), built as the others are: the server started in process on
// a loopback port over the shared client, called through its gRPC client
// for one descriptor per decision; the outbound limiter's reservation over
// the shared client, one reservation per decision, without the wait. Its
// entry here then goes.
var pendingPaths = []struct {
	name, where string
}{
	{"ratekit-server's gRPC path (envoy's `ShouldRateLimit`, one descriptor a call)", "`cmd/ratekit-server`, on branch `server`"},
	{"the outbound reservation (one reservation a call, without the wait)", "package `outbound`, on branch `outbound`"},
}

// pendingSection writes which paths are not measured yet, and why.
func pendingSection(p func(string, ...any)) {
	if len(pendingPaths) == 0 {
		return
	}
	p("Not measured yet, since their code is not in this tree (bench/cmd/compare/pending.go says where each")
	p("contender goes when it lands):")
	p("")
	for _, pp := range pendingPaths {
		p("- %s: %s.", pp.name, pp.where)
	}
	p("")
}
