package core

import (
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// keySlots is how many storage keys a Limiter remembers (see keyCache).
const keySlots = 64

// keyCache remembers storage keys recently built, so that the identities
// that come back often (a busy client, a hot key) do not have theirs built
// again: under a crowd, building a key (a string allocated and copied, and
// the garbage collector's share of it) costs more than the rest of
// planning a rule, where finding a remembered one reads a slot that every
// core keeps in its cache, since hits write nothing.
//
// Only keys that hold their identity as it is are remembered (prefix +
// rule + ":{" + identity + "}"), never a hashed one: a remembered key
// then answers an identity only if it holds that very identity and rule,
// which is checked on every hit, so a slot shared by two identities, or
// rewritten meanwhile, is a miss and never a wrong key. A miss remembers
// its key in an empty slot, else now and then (one time in keyRemember),
// so that identities seen once each, as over many keys, seldom write a
// slot.
//
// Each slot is a sequence lock over the key's bytes and length: a writer
// makes the sequence odd while it writes, and a reader that sees it odd or
// changed reads nothing. The bytes are those of an immutable string, which
// the slot's pointer keeps alive.
type keyCache struct {
	slots [keySlots]keySlot
}

// keyRemember is how rarely a miss remembers its key: one in keyRemember.
const keyRemember = 64

// keySlot is one remembered key, padded to a cache line of its own so that
// a write to one slot does not evict its neighbours from other cores.
type keySlot struct {
	seq atomic.Uint32 // odd while written
	n   atomic.Int32  // the key's length
	ptr atomic.Pointer[byte]
	_   [48]byte
}

// slot returns the slot of identity under rule: a hash of both, so that
// the rules of one identity (a per-second and a per-minute limit) take
// slots of their own. The hash has no seed: which keys share a slot is
// the same in every process, and keys that share one only miss.
func (c *keyCache) slot(rule, identity string) *keySlot {
	return &c.slots[(hashString(identity)^hashString(rule)*0x9e3779b97f4a7c15)%keySlots]
}

// hashString mixes s eight bytes at a time into a hash for choosing a
// slot: not one to keep apart keys that someone chose to collide, which
// would only make them miss.
func hashString(s string) uint64 {
	h := uint64(len(s)) * 0x9e3779b97f4a7c15
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = (h ^ w) * 0xff51afd7ed558ccd
		h ^= h >> 32
	}
	var w uint64
	for i := range len(s) {
		w |= uint64(s[i]) << (8 * i)
	}
	h = (h ^ w) * 0xc4ceb9fe1a85ec53
	return h ^ h>>29
}

// get returns the key remembered in s if it is identity's under rule,
// built with prefix.
func (s *keySlot) get(prefix, rule, identity string) (string, bool) {
	seq := s.seq.Load()
	if seq&1 != 0 {
		return "", false
	}
	p, n := s.ptr.Load(), s.n.Load()
	if p == nil || s.seq.Load() != seq {
		return "", false
	}
	key := unsafe.String(p, n)
	if !plainKey(key, prefix, rule, identity) {
		return "", false
	}
	return key, true
}

// put may remember key in s, its slot, built with prefix for identity
// under rule (see keyCache): always in an empty slot, one time in
// keyRemember in a full one; not if the identity was hashed into it, nor
// while another writer holds the slot.
func (s *keySlot) put(prefix, rule, identity, key string) {
	if s.ptr.Load() != nil && rand.Uint32()%keyRemember != 0 || !plainKey(key, prefix, rule, identity) {
		return
	}
	seq := s.seq.Load()
	if seq&1 != 0 || !s.seq.CompareAndSwap(seq, seq+1) {
		return
	}
	s.ptr.Store(unsafe.StringData(key))
	s.n.Store(int32(len(key)))
	s.seq.Store(seq + 2)
}

// plainKey reports whether key is prefix + rule + ":{" + identity + "}",
// the identity as it is.
func plainKey(key, prefix, rule, identity string) bool {
	r := len(prefix) + len(rule)
	return len(key) == r+len(identity)+3 &&
		key[len(key)-1] == '}' && key[r] == ':' && key[r+1] == '{' &&
		key[r+2:len(key)-1] == identity && key[len(prefix):r] == rule && key[:len(prefix)] == prefix
}
