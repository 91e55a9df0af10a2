// Package envoytest compares ratekit-server with envoyproxy/ratelimit,
// both run as processes on the same settings and files: answers over gRPC
// and /json, configuration files accepted and refused, and Prometheus
// series. cmd/speed measures both under the same load.
package envoytest
