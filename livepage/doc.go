// Package livepage serves a live page of what a [core.Limiter] is doing:
// its rules, the decisions per second each makes, the identities each
// denies most (this process's and the fleet's), the store's health, and a
// look-up, reset and override of one identity's quota.
package livepage

// DefaultCounters is how many identities a summary of top offenders keeps
// per rule unless [RecorderOptions].Counters says otherwise.
const DefaultCounters = 100
