package livepage

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fleet is where the processes of a fleet publish their summaries of
// denied identities, and where the page reads them all. [NewRedisFleet]
// keeps them in Redis.
type Fleet interface {
	// Publish stores payload as process's summary for ttl.
	Publish(ctx context.Context, process string, payload []byte, ttl time.Duration) error
	// Read returns every summary published and not expired.
	Read(ctx context.Context) ([][]byte, error)
}

// NewRedisFleet returns a Fleet in Redis under keys that start with
// prefix (such as the Limiter's, "ratekit:"): one sorted set indexing the
// processes and one string per process, all in one hash slot, so that a
// Redis Cluster holds them on one node. Each publication is one script
// call that writes the process's string with its expiry, indexes it by
// Redis's clock and drops index entries past the expiry; a read is one
// script call. The strings hold identities as the key functions made them,
// as the rate-limit keys beside them do.
func NewRedisFleet(client redis.Scripter, prefix string) (Fleet, error) {
	if client == nil {
		return nil, fmt.Errorf("livepage: NewRedisFleet: nil client")
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("livepage: NewRedisFleet: prefix %q holds a brace", prefix)
	}
	return &redisFleet{client: client, index: prefix + "livepage:{fleet}", values: prefix + "livepage:{fleet}:"}, nil
}

type redisFleet struct {
	client        redis.Scripter
	index, values string
}

// publishScript: KEYS[1] the index, KEYS[2] the process's string; ARGV[1]
// the process, ARGV[2] the payload, ARGV[3] the ttl in ms. Returns 1.
var publishScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
`)

// membersScript: KEYS[1] the index. Returns the processes it lists.
var membersScript = redis.NewScript(`return redis.call('ZRANGE', KEYS[1], 0, -1)`)

// readScript: KEYS the processes' strings (all in the index's slot).
// Returns each string, false where it has expired. The keys are declared,
// not built in the script, so servers that refuse undeclared keys run it.
var readScript = redis.NewScript(`return redis.call('MGET', (table.unpack or unpack)(KEYS))`)

func (f *redisFleet) Publish(ctx context.Context, process string, payload []byte, ttl time.Duration) error {
	err := publishScript.Run(ctx, f.client, []string{f.index, f.values + process}, process, payload, ttl.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("livepage: publish to the fleet: %w", err)
	}
	return nil
}

func (f *redisFleet) Read(ctx context.Context) ([][]byte, error) {
	members, err := membersScript.Run(ctx, f.client, []string{f.index}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("livepage: read the fleet: %w", err)
	}
	if len(members) == 0 {
		return nil, nil
	}
	keys := make([]string, len(members))
	for i, p := range members {
		keys[i] = f.values + p
	}
	v, err := readScript.Run(ctx, f.client, keys).Slice()
	if err != nil {
		return nil, fmt.Errorf("livepage: read the fleet: %w", err)
	}
	out := make([][]byte, 0, len(v))
	for _, x := range v {
		switch s := x.(type) {
		case nil: // expired between the two calls
		case string:
			out = append(out, []byte(s))
		default:
			return nil, fmt.Errorf("livepage: read the fleet: a %T in the reply", x)
		}
	}
	return out, nil
}

// processName returns host:pid.
func processName() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "localhost"
	}
	return strings.NewReplacer("{", "_", "}", "_").Replace(fmt.Sprintf("%s:%d", h, os.Getpid()))
}

// published is one process's publication.
type published struct {
	Process string                   `json:"process"`
	At      int64                    `json:"at"` // unix ms
	Rules   map[string]publishedRule `json:"rules"`
}

// publishedRule is a summary of denied identities, as published.
type publishedRule struct {
	N        uint64             `json:"n"`
	Rest     uint64             `json:"rest"`
	Counters []publishedCounter `json:"c"`
}

type publishedCounter struct {
	ID string `json:"i"`
	Hi uint64 `json:"h"`
	Lo uint64 `json:"l"`
}

func (p publishedRule) summary() (summary, error) {
	s := summary{N: p.N, Rest: p.Rest, Counters: make([]counter, 0, len(p.Counters))}
	for _, c := range p.Counters {
		if c.Lo > c.Hi || c.ID == "" {
			return summary{}, fmt.Errorf("livepage: a published counter %+v", c)
		}
		s.Counters = append(s.Counters, counter{id: c.ID, hi: c.Hi, lo: c.Lo})
	}
	return s, nil
}

func toPublished(s summary) publishedRule {
	p := publishedRule{N: s.N, Rest: s.Rest, Counters: make([]publishedCounter, len(s.Counters))}
	for i, c := range s.Counters {
		p.Counters[i] = publishedCounter{ID: c.id, Hi: c.hi, Lo: c.lo}
	}
	return p
}
