// Package storetest is the conformance suite of [core.Store]: what every
// store promises about [core.Store.AllowAllN], written once and run on
// every store. A store written elsewhere, over another client or another
// database, proves itself with one line in its tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, newStore)
//	}
//
// where newStore returns a fresh store for each case. core runs it on
// [memorystore.Store], on [redisstore.Store] over miniredis, a real Redis
// (with and without [redisstore.WithBatching]) and a real Redis Cluster, and on
// [leasestore.Store].
//
// # Time
//
// A store whose clock the test controls passes [WithAdvance] with a
// function that steps that clock; a store that reads time.Now in this
// process can run under [testing/synctest] instead, with [WithSynctest].
// The suite then checks every duration to the microsecond (a fixed
// window's to within 3 ms: a store may count them in whole ms of its
// clock, as Redis counts a key's expiry) and runs the cases that step
// time. A store on a real server's clock passes neither:
// durations are checked within the time the case has run, and the cases
// that step time are skipped. No case sleeps on the wall clock.
//
// # Cases
//
// Each case runs on a store of its own, with keys of its own; those marked
// "each algorithm" run once for each of GCRA, fixed window, sliding window
// log and sliding window counter. Every call of every case is also checked
// for the promises that hold whatever came before: one result per check,
// in the order of the checks and each for its check's limit; all allowed
// or none; Remaining within [0, capacity]; RetryAfter 0 when allowed, -1
// ([core.Result.Never]) for a cost above a limit's capacity and otherwise
// never negative, with at least one result of a denial saying how long to
// wait; ResetAfter never negative, and positive after units were spent.
//
//   - BurstThenDeny (each algorithm): a fresh key of 4 spent one unit at a
//     time, then asked for more: Remaining, RetryAfter and ResetAfter of
//     each result are what the algorithm computes; a cost of 5 is never
//     allowed; another identity's key is untouched.
//   - Cost: costs above 1, the whole capacity at once, costs that do not
//     fit and costs above capacity: a denied call spends nothing.
//   - AllOrNothing (each algorithm): two limits of one identity in one
//     call, one of another algorithm: spent together or not at all,
//     whether the denying check comes first or last, or denies a cost
//     above its capacity; a limit with room reports RetryAfter 0.
//   - Order: six checks in one call, then in reverse order: each result is
//     its own check's, among limits that differ and among keys of one
//     limit with different units left.
//   - LimitLowered (each algorithm): a key spent under a limit of 100,
//     then asked under one of 10, as after a configuration change: denied
//     with nothing remaining, never an error.
//   - Concurrent (each algorithm): 80 calls from 16 goroutines at a key of
//     40: exactly 40 admitted, each leaving a different Remaining.
//   - ConcurrentAllOrNothing (each algorithm): 64 calls of two limits from
//     16 goroutines: the tight limit admits exactly its 20, and the loose
//     one is spent by exactly those.
//   - InvalidInput: invalid rates, periods, bursts and algorithms, costs
//     below 1, empty keys, and no checks at all are errors wrapping
//     [core.ErrInvalidLimit], [core.ErrInvalidCost] or
//     [core.ErrInvalidIdentity], and spend nothing, not even the valid
//     checks of the call.
//   - RetryAfter (each algorithm, steps time): a microsecond before a
//     denial's RetryAfter the unit is still denied, at it the unit passes
//     (a fixed window: 3 ms before and after);
//     after two quiet periods the whole capacity is back.
//   - ResetAfter (each algorithm, steps time): a microsecond before an
//     allowed result's ResetAfter the whole capacity is still denied, at
//     it the whole capacity passes (a fixed window: 3 ms before and after).
//   - Recovery (each algorithm, steps time): GCRA regains one unit per
//     interval; a fixed window starts afresh at its edge, letting twice
//     the rate through across it; a sliding log gives each unit back one
//     period after it was admitted; a sliding counter weighs the previous
//     window by how much of it the period still covers.
//
// Cases of [core.QuotaStore]'s methods run when the store under test
// implements it, each for each algorithm (skipped otherwise):
//
//   - PeekSpendsNothing: a peek at a fresh key finds it full (ResetAfter
//     0); peeks after a unit report what is left, twice alike, and the next
//     unit leaves one fewer; a spent key peeks as denied.
//   - RefundGivesBack: 3 spent of 10 and 2 refunded leave 9, which a cost of
//     9 then spends; a refund to a spent key lets a unit through again.
//   - RefundNeverPastFull: a refund to a fresh key, or of more than was
//     spent, leaves the key full and never more: the capacity passes, a
//     unit more is denied.
//   - ResetMakesFull: a spent key reset is full again; another identity's
//     key is untouched; a key never used resets without error.
//   - LimitRaised: 10 spent under 10 per period, then 20 per period, as
//     after a live reconfiguration: 10 remain, to a decision and to a peek.
//   - LimitLoweredLive: 15 spent under 20 per period, then 10 per period:
//     denied with nothing remaining; for GCRA on a clock the suite steps,
//     exactly until 0.6 period, when a unit has refilled at the new rate.
//   - RefundToItsSpend (on a clock the suite steps): a refund whose
//     check's ResetAfter names the spend it gives back, as a Limiter ages
//     the ResetAfter of the decision that spent (here up to 300 ms late),
//     gives back to that spend only: nothing to a fixed window after the
//     one spent 100 ms before its edge, to a sliding counter's previous
//     window and not its current one, the sliding log's members of the
//     spend and not a later one's (units it then admits in that instant
//     stay distinct), and GCRA's units; a bound already past gives
//     nothing, a bound of 0 sets none.
//
// Cases of [core.ChargeStore]'s method run when the store under test
// implements it, each for each algorithm (skipped otherwise):
//
//   - ChargeIntoDebt: 3 spent of 10, then a charge of 15 lands whole; the
//     key, in debt, denies a unit and peeks as denied with nothing left; a
//     second charge lands too; a charge of a fresh key leaves its rest.
//   - ChargeBounded: a charge of 2^50 units spends the debt bound (the
//     capacity and [core.MaxDebtPeriods] × rate more; twice the rate for a
//     sliding log) and says so; a key at its bound takes nothing more.
//   - ChargeInvalid: no units, fewer than none, no checks and an invalid
//     limit are refused.
//   - ChargeRepaid (on a clock the suite steps): 25 charged under 10 per
//     minute deny a unit until the RetryAfter the charge reports (for GCRA
//     16 intervals) and allow it from then on.
//
// Cases of [core.QuotaStore]'s methods run when the store under test
// implements it (skipped otherwise); their checks name an override key,
// the storage key and ":override", and each result is checked for the
// limit that applies, the override's or the check's:
//
//   - OverrideRaisesAndLowers (each algorithm): overrides of 8 and 2 over
//     a limit of 4, each for one identity, apply to decisions (a cost of
//     6, above the check's capacity, included) and peeks with the check's
//     algorithm; a third identity, and a check that names no override key,
//     keep 4; a sliding log's override above [core.MaxLogRate] is none.
//   - OverrideCleared (each algorithm): 6 spent under an override of 8,
//     then cleared: denied under 4; clearing no override is no error.
//   - OverrideExpires (each algorithm, steps time): an override of 10 s
//     applies a millisecond before its expiry and not at it, what was
//     spent under it counting under the check's limit.
//   - OverrideInvalid: invalid limits, negative TTLs, empty keys, and
//     override keys equal to their storage key or of another hash tag are
//     errors wrapping [core.ErrInvalidLimit] or [core.ErrInvalidIdentity]
//     in SetOverride, ClearOverride and AllowAllN alike, and change nothing.
//
// # Leasing stores
//
// A store that takes units ahead of demand and spends them locally, as
// [leasestore.Store] does, passes [WithLeasing]: the suite then allows the
// differences such a store documents in the fields of its results (see
// WithLeasing), and checks everything else as for an exact store. Its
// documented overshoot arises only across replicas and over time; the
// suite runs one store at a time, which must not overshoot at all.
package storetest
