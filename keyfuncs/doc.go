// Package keyfuncs provides the key functions that decide what a rate limit
// limits: the client's IP address behind trusted proxies, a user taken from a
// verified JWT or from the application's own authentication, a hashed API
// key, the matched route, and chains of these.
//
// Every function here reads only the framework-neutral [core.Request], so it
// works unchanged with the net/http, Gin, Echo and Fiber adapters. Every
// returned [core.KeyFunc] is safe for concurrent use, never panics, and does
// bounded work whatever the request carries.
//
// # Identities
//
// An identity always starts with its kind, so identities of different kinds
// never collide:
//
//	ip:203.0.113.7              IP, IPv4 (IPv4-mapped IPv6 is reported as IPv4)
//	ip:2001:db8:1:2::/64        IP, IPv6 grouped by prefix (see IPv6Prefix)
//	user:42                     JWT, JWTHMAC, JWTPublicKey, ContextUser, ContextUserValue
//	apikey:9f86d081884c7d659a2feaa0c55ad015
//	                            APIKey: the first 16 bytes of a digest, in hex
//	route:/users/{id}           Route
//	header:X-Tenant-Id:acme     Header
//	static:global               Static
//	route:/strict|ip:203.0.113.7
//	                            Join
//
// # No identity
//
// A function that finds no identity of its kind returns an error wrapping
// [core.ErrNoIdentity]: no bearer token, a token that fails verification, no
// API key, a peer address that is not an IP address. [First] moves on to its
// next function when it sees such an error; an adapter answers it with its
// next extractor or with 401, as configured. Any other error means the key
// function is misconfigured.
//
// # Keys a client can choose
//
// A key that a client can choose freely limits nothing: the client sends a
// new key with each request, or sends a victim's key to lock the victim out.
// [IP] therefore reads forwarding headers only from configured trusted
// proxies, [JWT] accepts only verified tokens, and [Header] is meant only for
// headers that a trusted gateway sets.
package keyfuncs
