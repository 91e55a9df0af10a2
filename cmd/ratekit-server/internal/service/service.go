// Package service answers envoy's ShouldRateLimit as envoyproxy/ratelimit
// answers it, over ratekit's Limiters: a status per descriptor in request
// order; unmatched descriptors and unknown domains OK without a limit;
// unlimited, replaces, shadow_mode (per rule and global), quota_mode,
// request and per-descriptor hits_addend, a descriptor's own limit,
// response headers and dynamic metadata. It is the one place that
// decides; the gRPC, /json and later front doors only translate.
package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// ErrBadRequest is returned, wrapped, for a request envoy refuses too: an
// empty domain, no descriptors, a descriptor's limit without a unit, more
// hits than can be counted.
var ErrBadRequest = errors.New("bad rate limit request")

// ErrNoConfig is returned when no configuration was ever loaded (the
// server started with FORCE_START_WITHOUT_INITIAL_CONFIG).
var ErrNoConfig = errors.New("no rate limit configuration loaded")

// Options are the settings a Service answers by.
type Options struct {
	// GlobalShadow answers OK whatever the limits say (SHADOW_MODE).
	GlobalShadow bool
	// GlobalQuota answers every over-limit descriptor as quota_mode does
	// (QUOTA_MODE).
	GlobalQuota bool
	// Headers, when set, adds the headers of the descriptor closest to
	// its limit to every answer (LIMIT_RESPONSE_HEADERS_ENABLED), under
	// these names.
	Headers                                   bool
	LimitHeader, RemainingHeader, ResetHeader string
	// DynamicMetadata adds envoy's dynamic metadata to every answer
	// (RESPONSE_DYNAMIC_METADATA).
	DynamicMetadata bool
	// RuleMetadata names, in every answer's dynamic metadata, the rule
	// that decided it (RATEKIT_RULE_METADATA), under RuleMetadataKey.
	RuleMetadata bool
	// Stop counts as STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT does: when a
	// descriptor would go over its limit, only the descriptors that would
	// go over are counted, in one atomic script.
	Stop bool
	// NearLimitRatio is the share of a limit above which a hit counts as
	// near the limit in statistics (NEAR_LIMIT_RATIO).
	NearLimitRatio float32
	// LocalCache is set when denials are remembered locally
	// (LOCAL_CACHE_SIZE_IN_BYTES), for the statistics.
	LocalCache bool
	// CallerLimits is what becomes of a descriptor that brings its own
	// limit (RATEKIT_CALLER_LIMITS): counted by it (the zero value, as
	// envoy), counted as if it brought none, or the request refused.
	CallerLimits CallerLimits
	// CallerMaxUnit is the longest unit a descriptor's own limit may ask
	// for (RATEKIT_CALLER_LIMIT_MAX_UNIT): a longer one is refused, with
	// ErrBadRequest. UNKNOWN lets every unit through.
	CallerMaxUnit config.Unit
	// Watch, when set, is told each descriptor's decision with its
	// identity (core.IdentityObserver.DecidedIdentity): Watch[0] those of
	// envoy-counted limits, Watch[1] those of ratekit's algorithms. The
	// event's rule is the configuration's (Rule.FullKey; for a descriptor
	// that brought its own limit, its domain and OwnLimit), so that there
	// are as many names as rules whatever the descriptors' values. The
	// live page's Recorders count offenders by them.
	Watch [2]core.IdentityObserver
	// Logger logs what goes wrong with one request, at Debug.
	Logger *slog.Logger
	// Now is the clock of the answers made without Redis; time.Now when
	// nil.
	Now func() time.Time
}

// CallerLimits is what a Service does with a descriptor's own limit.
type CallerLimits uint8

const (
	// AcceptCallerLimits counts the descriptor by its own limit.
	AcceptCallerLimits CallerLimits = iota
	// IgnoreCallerLimits counts it by the rule of the files it matches.
	IgnoreCallerLimits
	// RefuseCallerLimits refuses the request with ErrBadRequest.
	RefuseCallerLimits
)

// Service answers ShouldRateLimit. It is safe for concurrent use.
type Service struct {
	opts   Options
	cfg    atomic.Pointer[config.Config]
	compat *core.Limiter // counts as envoy counts (compat.Store)
	native *core.Limiter // ratekit's algorithms (the library's RedisStore)
	stats  *stats.Stats
	now    func() time.Time
	log    *slog.Logger
}

// New returns a Service deciding envoy-counted limits with compatL and
// limits of ratekit's algorithms with nativeL, recording statistics in st.
func New(compatL, nativeL *core.Limiter, st *stats.Stats, opts Options) *Service {
	s := &Service{opts: opts, compat: compatL, native: nativeL, stats: st, now: opts.Now, log: opts.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.NearLimitRatio == 0 {
		s.opts.NearLimitRatio = 0.8
	}
	return s
}

// SetConfig makes c the configuration of every later request.
func (s *Service) SetConfig(c *config.Config) { s.cfg.Store(c) }

// Config returns the configuration in use, or nil before the first.
func (s *Service) Config() *config.Config { return s.cfg.Load() }

// descriptor is one descriptor of a request, on its way to an answer.
type descriptor struct {
	in        *rlv3.RateLimitDescriptor
	rule      *config.Rule // nil: no limit
	limit     config.Limit // the limit answers report (Limits[0], or the descriptor's own)
	override  bool         // the descriptor's own limit
	unlimited bool
	hits      int64
	statsKey  string
	identity  string
	status    *rlspb.RateLimitResponse_DescriptorStatus // the cache's answer
	cached    bool                                      // a local denial answered
	counts    []int64                                   // the store's counts, when it answered
	result    core.Result                               // the deciding limit's result, in the library's terms
	decided   bool                                      // result is set
}

// ShouldRateLimit answers req as envoyproxy/ratelimit would.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		s.stats.ServiceError.Inc()
	}
	return resp, err
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp, _, err := s.run(ctx, req)
	return resp, err
}

// run answers req and returns its descriptors as decided.
func (s *Service) run(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, []descriptor, error) {
	if req.GetDomain() == "" {
		return nil, nil, fmt.Errorf("%w: rate limit domain must not be empty", ErrBadRequest)
	}
	if len(req.GetDescriptors()) == 0 {
		return nil, nil, fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrBadRequest)
	}
	if n := len(req.GetDescriptors()); n > MaxDescriptors {
		return nil, nil, fmt.Errorf("%w: %d descriptors in one request; at most %d", ErrBadRequest, n, MaxDescriptors)
	}
	for i, d := range req.GetDescriptors() {
		if n := len(d.GetEntries()); n > MaxEntries {
			return nil, nil, fmt.Errorf("%w: descriptor %d has %d entries; at most %d", ErrBadRequest, i, n, MaxEntries)
		}
	}
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, nil, ErrNoConfig
	}
	ds, err := s.plan(cfg, req)
	if err != nil {
		return nil, nil, err
	}
	if err := s.decide(ctx, req.GetDomain(), ds); err != nil {
		return nil, nil, err
	}
	return s.answer(req, ds), ds, nil
}

// Bounds of one request: envoy's own filters send a handful of
// descriptors of a few entries each.
const (
	MaxDescriptors = 256
	MaxEntries     = 256
)

// maxHits bounds the hits of one descriptor: counts stay exact.
const maxHits = 1 << 32

// plan matches every descriptor, applies unlimited and replaces, and
// works out each one's hits, as envoy's constructLimitsToCheck does.
func (s *Service) plan(cfg *config.Config, req *rlspb.RateLimitRequest) ([]descriptor, error) {
	domain := cfg.Domain(req.GetDomain())
	ds := make([]descriptor, len(req.GetDescriptors()))
	var replacing map[string]bool // made when a rule replaces
	for i, in := range req.GetDescriptors() {
		d := &ds[i]
		d.in = in
		d.hits = int64(max(1, req.GetHitsAddend()))
		if h := in.GetHitsAddend(); h != nil {
			if h.GetValue() > maxHits {
				return nil, fmt.Errorf("%w: descriptor %d: hits_addend %d is above %d", ErrBadRequest, i, h.GetValue(), uint64(maxHits))
			}
			d.hits = int64(h.GetValue())
		}
		if domain == nil {
			continue
		}
		if o := in.GetLimit(); o != nil && s.opts.CallerLimits != IgnoreCallerLimits {
			if err := s.callerLimit(d, req.GetDomain(), i, o); err != nil {
				return nil, err
			}
			continue
		}
		m := domain.Match(in.GetEntries())
		if m.Rule == nil {
			continue
		}
		for _, r := range m.Rule.Replaces {
			if replacing == nil {
				replacing = map[string]bool{}
			}
			replacing[r] = true
		}
		if m.Rule.Unlimited {
			d.unlimited = true
			continue
		}
		d.rule, d.limit, d.statsKey = m.Rule, m.Rule.Limits[0], m.StatsKey
		d.identity = identity(req.GetDomain(), in.GetEntries(), m.Share)
	}
	for i := range ds {
		if r := ds[i].rule; r != nil && r.Name != "" && replacing[r.Name] {
			ds[i].rule = nil
		}
	}
	return ds, nil
}

// callerLimit makes d, the request's descriptor i, one decided by the
// limit o it brings, or refuses it as the settings say.
func (s *Service) callerLimit(d *descriptor, domain string, i int, o *rlv3.RateLimitDescriptor_RateLimitOverride) error {
	if s.opts.CallerLimits == RefuseCallerLimits {
		return fmt.Errorf("%w: descriptor %d brings its own limit, which this server refuses (RATEKIT_CALLER_LIMITS)", ErrBadRequest, i)
	}
	unit := config.Unit(o.GetUnit())
	period, ok := config.UnitLength(unit)
	if !ok {
		return fmt.Errorf("%w: descriptor %d: its limit has no valid unit (%v)", ErrBadRequest, i, o.GetUnit())
	}
	if most, ok := config.UnitLength(s.opts.CallerMaxUnit); ok && period > most {
		return fmt.Errorf("%w: descriptor %d: its limit's unit %v is longer than %v (RATEKIT_CALLER_LIMIT_MAX_UNIT)", ErrBadRequest, i, o.GetUnit(), s.opts.CallerMaxUnit)
	}
	rpu := min(o.GetRequestsPerUnit(), core.MaxRate)
	d.rule = &config.Rule{FullKey: config.OverrideStatsKey(domain, d.in.GetEntries())}
	d.limit = config.Limit{RequestsPerUnit: rpu, Unit: unit, Period: period, Algorithm: config.Compatible}
	d.rule.Limits = []config.Limit{d.limit}
	d.override = true
	d.statsKey = d.rule.FullKey
	d.identity = identity(domain, d.in.GetEntries(), nil)
	return nil
}

// identity names a descriptor in storage keys: the domain and each entry,
// escaped so that two descriptors never share a name. A share_threshold
// entry stands as its wildcard. The library hashes an identity that could
// steer a Redis Cluster slot (braces, control bytes, over 128 bytes).
func identity(domain string, entries []*rlv3.RateLimitDescriptor_Entry, share []string) string {
	var b strings.Builder
	n := len(domain)
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 2
	}
	b.Grow(n)
	escape(&b, domain)
	for i, e := range entries {
		b.WriteByte('|')
		escape(&b, e.GetKey())
		b.WriteByte('=')
		v := e.GetValue()
		if i < len(share) && share[i] != "" {
			v = share[i]
		}
		escape(&b, v)
	}
	return b.String()
}

func escape(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, `\|=`) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '|' || c == '=' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// decide asks the Limiters about every limited descriptor, and records
// the statistics of each.
func (s *Service) decide(ctx context.Context, domain string, ds []descriptor) error {
	if s.opts.Stop {
		if err := s.decideStop(ctx, domain, ds); err != nil {
			return err
		}
	}
	// descriptors are counted apart, as envoy counts them: several are
	// asked at once, so that they share a round trip, except those of one
	// storage key, which go one after the other in request order
	var err error
	if len(ds) == 1 {
		if d := &ds[0]; d.rule != nil && d.status == nil {
			err = s.decideOne(ctx, d)
		}
	} else {
		err = s.decideGroups(ctx, byStorageKey(ds))
	}
	if err != nil {
		return err
	}
	for i := range ds {
		if d := &ds[i]; d.rule != nil {
			s.watch(ctx, domain, d)
			s.record(d)
		}
	}
	return nil
}

// OwnLimit names, after its domain and a dot, the rule of the
// descriptors that bring their own limit, in Options.Watch's events.
const OwnLimit = "(own limit)"

// watch tells the Watch observer of d's counting what d's limits decided:
// a decision that spent hits, not a look.
func (s *Service) watch(ctx context.Context, domain string, d *descriptor) {
	o := s.opts.Watch[1]
	if d.limit.Algorithm == config.Compatible {
		o = s.opts.Watch[0]
	}
	if o == nil || !d.decided || d.hits == 0 {
		return
	}
	name := d.rule.FullKey
	if d.override {
		name = domain + "." + OwnLimit
	}
	e := core.DecisionEvent{Rule: name, Result: d.result, Shadow: d.rule.ShadowMode || s.opts.GlobalShadow, Cached: d.cached}
	o.DecidedIdentity(ctx, e, d.identity)
}

// byStorageKey returns the descriptors of ds still to decide, grouped by
// storage key (identity, algorithm and window), each group in request
// order and the groups in the order of their first descriptor.
func byStorageKey(ds []descriptor) [][]*descriptor {
	var groups [][]*descriptor
	index := map[string]int{}
	for i := range ds {
		d := &ds[i]
		if d.rule == nil || d.status != nil {
			continue
		}
		k := d.identity + "\x00" + d.limit.Algorithm.String() + d.limit.Period.String()
		j, ok := index[k]
		if !ok {
			j = len(groups)
			index[k] = j
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], d)
	}
	return groups
}

// decideGroups decides each group's descriptors one after the other, and
// the groups at once, each in a goroutine of its own when there are
// several.
func (s *Service) decideGroups(ctx context.Context, groups [][]*descriptor) error {
	switch len(groups) {
	case 0:
		return nil
	case 1:
		return s.decideInOrder(ctx, groups[0])
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { errs[i] = s.decideInOrder(ctx, g) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// decideInOrder decides the descriptors of g one after the other, and
// stops at the first error.
func (s *Service) decideInOrder(ctx context.Context, g []*descriptor) error {
	for _, d := range g {
		if err := s.decideOne(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) decideOne(ctx context.Context, d *descriptor) error {
	if d.limit.Algorithm == config.Compatible {
		return s.decideCompat(ctx, d)
	}
	return s.decideNative(ctx, d)
}

// request is the core.Request of one descriptor: the Limiter's key and
// cost functions read its identity and hits.
type request struct {
	ctx      context.Context
	identity string
	hits     int
}

func (r *request) Context() context.Context     { return r.ctx }
func (r *request) Method() string               { return "" }
func (r *request) Path() string                 { return "" }
func (r *request) Route() string                { return "" }
func (r *request) Header(string) string         { return "" }
func (r *request) HeaderValues(string) []string { return nil }
func (r *request) Query(string) string          { return "" }
func (r *request) RemoteAddr() string           { return "" }
func keyOf(r core.Request) (string, error)      { return r.(*request).identity, nil }
func costOf(r core.Request) int                 { return r.(*request).hits }

// compatRule is the library rule of an envoy-counted limit: the rule name
// carries the window, so that limits of one descriptor with different
// units count apart, and a descriptor sent with its own limit of the
// configured unit counts with the configured one, as in envoy.
func compatRule(l config.Limit) core.Rule {
	return core.Rule{
		Name:  "rl" + strconv.FormatInt(int64(l.Period/time.Second), 10) + "s",
		Limit: l.Core(),
		Key:   keyOf,
		Cost:  costOf,
	}
}

func (s *Service) decideCompat(ctx context.Context, d *descriptor) error {
	if d.limit.RequestsPerUnit == 0 {
		// no library limit holds 0: every hit is over, counted nowhere
		left := s.windowLeft(d.limit.Period)
		d.status = s.status(rlspb.RateLimitResponse_OVER_LIMIT, d, 0, left)
		d.setResult(core.Result{Limit: core.Limit{Period: d.limit.Period, Algorithm: core.FixedWindow}, RetryAfter: -1, ResetAfter: left}) // no wait helps
		if d.hits == 0 {
			d.status.Code = rlspb.RateLimitResponse_OK
			d.result.Allowed, d.result.RetryAfter = true, 0
		}
		return nil
	}
	rule := compatRule(d.limit)
	// the count after the call tells the statistics how many of several
	// hits went over; one hit needs no count (over means over before it)
	var call *compat.Call
	cctx := ctx
	if d.hits > 1 || s.opts.LocalCache { // with a local cache, whether Redis answered
		call = &compat.Call{}
		cctx = compat.With(ctx, call)
	}
	req := &request{ctx: cctx, identity: d.identity, hits: int(d.hits)}
	if d.hits == 0 {
		r, err := s.compat.Peek(cctx, rule, d.identity)
		if err != nil {
			if gaveUp := tickctx.Expired(ctx); gaveUp != nil {
				return gaveUp
			}
			// a look spends nothing: with Redis away, say what is known
			s.log.Debug("a look (hits_addend 0) without Redis answers OK", "error", err)
			s.unknownLook(d)
			return nil
		}
		d.settle(s, r, call)
		return nil
	}
	dec, err := s.compat.Check(cctx, req, []core.Rule{rule})
	if err != nil && !errors.Is(err, core.ErrUnavailable) {
		return s.storeError(ctx, err)
	}
	r := dec.Results[0]
	d.cached = !r.Allowed && !r.Degraded && s.opts.LocalCache && r.RetryAfter >= 0 && cachedAnswer(call)
	d.settle(s, r.Result, call)
	return nil
}

// cachedAnswer reports whether a denial may have come from the local
// cache: the store did not answer the call (unknown without a Call).
func cachedAnswer(call *compat.Call) bool { return call == nil || !call.Answered }

// settle makes the cache's status of d from the result of its limit.
func (d *descriptor) settle(s *Service, r core.Result, call *compat.Call) {
	if call != nil && call.Answered {
		d.counts = call.Counts
	}
	reset := r.ResetAfter
	if !r.Allowed {
		reset = max(reset, r.RetryAfter)
	}
	if reset <= 0 && d.limit.Algorithm == config.Compatible {
		// a denial made without asking Redis (a cost above the limit):
		// the window's end by the local clock
		reset = s.windowLeft(d.limit.Period)
	}
	d.setResult(r)
	if r.Allowed {
		d.status = s.status(rlspb.RateLimitResponse_OK, d, uint32(r.Remaining), reset)
		return
	}
	d.status = s.status(rlspb.RateLimitResponse_OVER_LIMIT, d, 0, reset)
}

func (d *descriptor) setResult(r core.Result) { d.result, d.decided = r, true }

// unknownLook answers a look at d made without Redis: OK, the whole limit
// left, which is what is known.
func (s *Service) unknownLook(d *descriptor) {
	left := s.windowLeft(d.limit.Period)
	d.status = s.status(rlspb.RateLimitResponse_OK, d, d.limit.RequestsPerUnit, left)
	lim := d.limit.Core()
	d.setResult(core.Result{Limit: lim, Allowed: true, Remaining: lim.Capacity(), ResetAfter: left, Degraded: true})
}

func (s *Service) storeError(ctx context.Context, err error) error {
	// the caller's deadline passed, though its timer may not have fired
	// yet when go-redis timed out on it
	if gaveUp := tickctx.Expired(ctx); gaveUp != nil {
		return gaveUp
	}
	s.stats.RedisError.Inc()
	return err
}

// decideStop decides every envoy-counted descriptor of the request in one
// call, as STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT counts them. The keys
// share the domain's hash tag, so that a Redis Cluster keeps them in one
// slot and one script decides them.
func (s *Service) decideStop(ctx context.Context, domain string, ds []descriptor) error {
	var (
		rules []core.Rule
		idx   []int
		hits  []int64
	)
	for i := range ds {
		d := &ds[i]
		if d.rule == nil || d.limit.Algorithm != config.Compatible || d.limit.RequestsPerUnit == 0 {
			continue
		}
		r := compatRule(d.limit)
		// the descriptors share one identity, the domain's, so that their
		// keys share a Redis Cluster slot: each one's counter is named by
		// its rule, which carries a hash of the descriptor (stopName);
		// Observer labels metrics by the configured limit alone
		r.Name += stopSep + hashHex(d.identity)
		r.Cost = nil
		rules = append(rules, r)
		idx = append(idx, i)
		hits = append(hits, d.hits)
	}
	if len(rules) == 0 {
		return nil
	}
	call := &compat.Call{Stop: true, Hits: hits}
	cctx := compat.With(ctx, call)
	req := &request{ctx: cctx, identity: "stop|" + domain, hits: 1}
	dec, err := s.compat.Check(cctx, req, rules)
	if err != nil && !errors.Is(err, core.ErrUnavailable) {
		return s.storeError(ctx, err)
	}
	for j, i := range idx {
		d := &ds[i]
		var r core.Result
		if j < len(dec.Results) {
			r = dec.Results[j].Result
		}
		d.settle(s, r, nil)
		if call.Answered && j < len(call.Counts) {
			d.counts = []int64{call.Counts[j]}
		}
	}
	return nil
}

// decideNative decides a descriptor of ratekit's algorithms: all its
// limits in one script call, all or nothing.
func (s *Service) decideNative(ctx context.Context, d *descriptor) error {
	rules := make([]core.Rule, len(d.rule.Limits))
	for i, l := range d.rule.Limits {
		rules[i] = core.Rule{Name: "rk" + strconv.Itoa(i), Limit: l.Core(), Key: keyOf, Cost: costOf}
	}
	if d.hits == 0 {
		return s.peekNative(ctx, d, rules)
	}
	req := &request{ctx: ctx, identity: d.identity, hits: int(d.hits)}
	dec, err := s.native.Check(ctx, req, rules)
	if err != nil && !errors.Is(err, core.ErrUnavailable) {
		return s.storeError(ctx, err)
	}
	if dec.Limiting < 0 || dec.Limiting >= len(dec.Results) {
		return fmt.Errorf("ratekit: no result for %s", d.rule.FullKey)
	}
	lr := dec.Results[dec.Limiting]
	d.limit = d.rule.Limits[dec.Limiting]
	if !dec.Allowed && err == nil && d.rule.HitsAlwaysLand {
		res, err := s.chargeNative(ctx, d, rules, dec.Limiting)
		if err != nil {
			return err
		}
		lr.Result = res
	}
	d.settle(s, lr.Result, nil)
	return nil
}

// chargeNative charges d's hits, which its limits denied, to each of them
// all the same (hits_always_land), and returns what the limit at limiting
// holds after the charge: a debt, over until it is repaid.
func (s *Service) chargeNative(ctx context.Context, d *descriptor, rules []core.Rule, limiting int) (core.Result, error) {
	var out core.Result
	for i, r := range rules {
		res, err := s.native.Charge(ctx, r, d.identity, int(d.hits))
		if err != nil && !errors.Is(err, core.ErrUnavailable) {
			return core.Result{}, s.storeError(ctx, err)
		}
		if i == limiting {
			out = res.Result
			out.Allowed = false
		}
	}
	return out, nil
}

// peekNative answers a look at every limit of d: over when any limit has
// no unit left.
func (s *Service) peekNative(ctx context.Context, d *descriptor, rules []core.Rule) error {
	best := -1
	var bestR core.Result
	for i, r := range rules {
		res, err := s.native.Peek(ctx, r, d.identity)
		if err != nil {
			if gaveUp := tickctx.Expired(ctx); gaveUp != nil {
				return gaveUp
			}
			s.log.Debug("a look (hits_addend 0) without Redis answers OK", "error", err)
			s.unknownLook(d)
			return nil
		}
		if best < 0 || !res.Allowed && bestR.Allowed || res.Allowed == bestR.Allowed && res.Remaining < bestR.Remaining {
			best, bestR = i, res
		}
	}
	d.limit = d.rule.Limits[best]
	d.settle(s, bestR, nil)
	return nil
}

// windowLeft is the time to the end of the current calendar window of
// period, by the local clock.
func (s *Service) windowLeft(period time.Duration) time.Duration {
	now := s.now().UnixNano()
	p := int64(period)
	return time.Duration(p - now%p)
}

// status is the cache's status of a limited descriptor.
func (s *Service) status(code rlspb.RateLimitResponse_Code, d *descriptor, remaining uint32, reset time.Duration) *rlspb.RateLimitResponse_DescriptorStatus {
	secs := int64(math.Ceil(reset.Seconds()))
	cur := d.limit.Proto
	if cur == nil {
		cur = &rlspb.RateLimitResponse_RateLimit{Name: d.limit.Name, RequestsPerUnit: d.limit.RequestsPerUnit, Unit: d.limit.Unit}
	}
	return &rlspb.RateLimitResponse_DescriptorStatus{
		Code:               code,
		CurrentLimit:       cur,
		LimitRemaining:     remaining,
		DurationUntilReset: &durationpb.Duration{Seconds: max(secs, 1)},
	}
}

// record counts d's hits in its statistics, as envoy's base limiter does;
// and turns an over-limit status OK under shadow_mode.
func (s *Service) record(d *descriptor) {
	kind := stats.Configured
	switch {
	case d.override:
		kind = stats.Caller
	case d.statsKey != d.rule.FullKey:
		kind = stats.Values
	}
	st := s.stats.Key(kind, d.statsKey)
	hits := uint64(d.hits)
	st.TotalHits.Add(hits)
	over := d.status.Code == rlspb.RateLimitResponse_OVER_LIMIT
	limit := uint64(d.limit.RequestsPerUnit)
	near := uint64(math.Floor(float64(float32(limit) * s.opts.NearLimitRatio)))
	after, before := uint64(0), uint64(0)
	known := len(d.counts) == 1
	if known {
		after = uint64(d.counts[0])
		before = after - min(after, hits)
	}
	switch {
	case over && d.cached:
		st.OverLimit.Add(hits)
		st.OverLimitWithLocalCache.Add(hits)
	case over:
		if !known || before >= limit {
			st.OverLimit.Add(hits)
		} else {
			st.OverLimit.Add(after - limit)
			st.NearLimit.Add(limit - max(near, before))
		}
	default:
		if !known {
			after = limit - uint64(d.status.LimitRemaining)
			before = after - min(after, hits)
		}
		if after > near {
			if before >= near {
				st.NearLimit.Add(hits)
			} else {
				st.NearLimit.Add(after - near)
			}
		}
		st.WithinLimit.Add(hits)
	}
	if over && d.rule.ShadowMode {
		d.status.Code = rlspb.RateLimitResponse_OK
		if d.cached || !known || before >= limit {
			st.ShadowMode.Add(hits)
		} else {
			st.ShadowMode.Add(after - limit)
		}
	}
}

// answer builds the response from the statuses, as envoy's
// shouldRateLimitWorker does.
func (s *Service) answer(req *rlspb.RateLimitRequest, ds []descriptor) *rlspb.RateLimitResponse {
	resp := &rlspb.RateLimitResponse{Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(ds))}
	final := rlspb.RateLimitResponse_OK
	minRemaining := uint32(math.MaxUint32)
	var closest *rlspb.RateLimitResponse_DescriptorStatus
	var violations, passed []int
	for i := range ds {
		d := &ds[i]
		st := d.status
		if st == nil {
			st = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		}
		if s.opts.Headers && st.CurrentLimit != nil && st.LimitRemaining < minRemaining {
			closest, minRemaining = st, st.LimitRemaining
		}
		if s.opts.DynamicMetadata && st.Code != rlspb.RateLimitResponse_OVER_LIMIT && !d.unlimited {
			passed = append(passed, i)
		}
		switch {
		case d.unlimited:
			resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		case st.Code == rlspb.RateLimitResponse_OVER_LIMIT && (s.opts.GlobalQuota || d.rule != nil && d.rule.QuotaMode):
			violations = append(violations, i)
			resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, CurrentLimit: st.CurrentLimit, LimitRemaining: st.LimitRemaining}
		case st.Code == rlspb.RateLimitResponse_OVER_LIMIT:
			resp.Statuses[i] = st
			final = st.Code
			closest, minRemaining = st, 0
		default:
			resp.Statuses[i] = st
		}
	}
	if s.opts.Headers && closest != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.opts.LimitHeader, Value: strconv.FormatUint(uint64(closest.CurrentLimit.GetRequestsPerUnit()), 10)},
			{Key: s.opts.RemainingHeader, Value: strconv.FormatUint(uint64(closest.LimitRemaining), 10)},
			{Key: s.opts.ResetHeader, Value: strconv.FormatInt(s.resetOf(closest), 10)},
		}
	}
	if final == rlspb.RateLimitResponse_OVER_LIMIT && s.opts.GlobalShadow {
		final = rlspb.RateLimitResponse_OK
		s.stats.GlobalShadowMode.Inc()
	}
	if s.opts.DynamicMetadata {
		resp.DynamicMetadata = metadata(req, violations, ds, passed)
	}
	resp.OverallCode = final
	if s.opts.RuleMetadata {
		addRule(resp, ds)
	}
	return resp
}

// resetOf is the reset header of a status: the seconds to its window's
// end.
func (s *Service) resetOf(st *rlspb.RateLimitResponse_DescriptorStatus) int64 {
	if d := st.GetDurationUntilReset(); d != nil {
		return d.GetSeconds()
	}
	period, ok := config.UnitLength(st.GetCurrentLimit().GetUnit())
	if !ok {
		return 0
	}
	return int64(math.Ceil(s.windowLeft(period).Seconds()))
}

// stopSep separates, in the rule name of a counter of decideStop, the
// configured limit's name from the descriptor's hash; the names of
// compatRule and decideNative never hold it.
const stopSep = "."

// Observer returns o labelling every decision by the name of its
// configured limit: the window of an envoy-counted limit (rl60s), the
// place of one of ratekit's algorithms among its rule's limits (rk0). The
// counters of STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT carry a hash of
// their descriptor in their rule's name, which would otherwise make a
// metric label per client. Give it to both Limiters (core.WithObserver).
func Observer(o core.Observer) core.Observer { return observer{o} }

type observer struct{ core.Observer }

func (o observer) Decided(ctx context.Context, e core.DecisionEvent) {
	e.Rule, _, _ = strings.Cut(e.Rule, stopSep)
	o.Observer.Decided(ctx, e)
}

// hashHex is a short hex hash of s, for rule names that must not carry s.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
