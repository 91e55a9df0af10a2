// Package examples holds ratekit's runnable example apps, one per
// framework, and a multi-replica demo; each is a main package in a
// directory of its own:
//
//	go run ./examples/demo       # four replicas, one shared limit, an outage
//	go run ./examples/nethttp    # or gin, echo, fiber
//
// With no Redis address the apps start an embedded Redis (miniredis), so
// they run with no setup. The package itself holds no code: its tests hold
// the code of README.md and of the guides under docs/, compiled and checked
// against each page, and check the pages' links.
package examples
