package livepage

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ratekit/ratekit/core"
)

//go:embed assets
var assets embed.FS

// Source is one Limiter the page shows.
type Source struct {
	// Name names the Limiter on the page; it may be empty when there is
	// one.
	Name string
	// Limiter is what the page's look-up, reset and override go to.
	Limiter *core.Limiter
	// Recorder is the Limiter's observer ([core.WithObserver]).
	Recorder *Recorder
	// Rules, when set, returns the rules the Limiter enforces: the page
	// lists them before any decision, and peeks, resets and overrides by
	// them. A rule of a per-request limit ([core.Rule.LimitOf]) is peeked
	// at its Limit.
	Rules func() []core.Rule
}

// Options configure a [Handler].
type Options struct {
	// Token, when set, lets requests that carry it in "Authorization:
	// Bearer <Token>" reset quotas and set overrides. Empty: the page is
	// read-only.
	Token string
	// ShowIdentities shows identities as their key functions made them
	// ("ip:203.0.113.7"). By default the page shows a keyed hash of each
	// (its kind and 12 hex digits), alike within one Handler, that nobody
	// can reverse by hashing guesses without the key, drawn at random
	// when the Handler is made.
	ShowIdentities bool
	// Tables, when set, returns tables of the application's own the page
	// shows beneath the store's health, such as where its rules were
	// loaded from; status.json serves them as "tables". Their cells are
	// shown as text.
	Tables func() []Table
}

// Table is a table of [Options].Tables: a title, the columns' names, and
// rows of as many cells.
type Table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// Handler serves the live page of one or several Limiters, under any
// prefix it is mounted at (such as "/ratekit/"):
//
//	GET  <prefix>/              the page (HTML, its script and style embedded)
//	GET  <prefix>/status.json   the same data as JSON ([Status])
//	GET  <prefix>/peek?identity=I[&rule=R][&limiter=L]   each rule's quota of I, unspent
//	POST <prefix>/reset?rule=R&identity=I[&limiter=L]    with the token: clear it (204)
//	POST <prefix>/override?rule=R&identity=I&rate=N&period=D[&burst=B][&ttl=D] or &clear=1
//
// Who may see the page: whoever reaches it sees the rules, the rates,
// the store's health and the offenders (hashed unless
// [Options].ShowIdentities), and may peek at a quota they name. Mount it
// where only operators reach it, as net/http/pprof. Writes need the token
// and are refused from other origins (Sec-Fetch-Site, Origin).
type Handler struct {
	opts    Options
	sources []Source
	key     []byte
	cross   *http.CrossOriginProtection
}

// New returns a Handler over sources.
func New(opts Options, sources ...Source) (*Handler, error) {
	if len(sources) == 0 {
		return nil, errors.New("livepage: New: no source")
	}
	for i, s := range sources {
		if s.Limiter == nil || s.Recorder == nil {
			return nil, fmt.Errorf("livepage: New: source %d (%q) lacks its Limiter or Recorder", i, s.Name)
		}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Handler{opts: opts, sources: sources, key: key, cross: http.NewCrossOriginProtection()}, nil
}

// ServeHTTP serves the page, its data and its actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	name := ""
	if !strings.HasSuffix(r.URL.Path, "/") {
		name = path.Base(r.URL.Path)
	}
	switch name {
	case "", "app.js", "style.css":
		h.asset(w, r, name)
	case "status.json":
		h.serveStatus(w, r)
	case "peek":
		h.peek(w, r)
	case "reset", "override":
		h.write(w, r, name)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	file, ctype := "assets/index.html", "text/html; charset=utf-8"
	switch name {
	case "app.js":
		file, ctype = "assets/app.js", "text/javascript; charset=utf-8"
	case "style.css":
		file, ctype = "assets/style.css", "text/css; charset=utf-8"
	}
	b, err := assets.ReadFile(file)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(b)
}

// show returns id as the page shows it.
func (h *Handler) show(id string) string {
	if h.opts.ShowIdentities {
		return id
	}
	kind, rest, ok := strings.Cut(id, ":")
	if !ok || !isKind(kind) {
		kind, rest = "", id
	}
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(rest))
	sum := hex.EncodeToString(m.Sum(nil)[:6])
	if kind == "" {
		return sum
	}
	return kind + ":" + sum
}

// isKind reports whether s, before an identity's first colon, is a kind
// as key functions write them ("ip", "apikey"): short, of letters, digits,
// '-' and '_', as the denial log's redaction takes it. Anything else (in
// a descriptor "d|user=alice:x") may be part of a value, and is hashed
// with the rest.
func isKind(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// source returns the source a request names (limiter=L), or the first.
func (h *Handler) source(r *http.Request) (Source, bool) {
	name := r.URL.Query().Get("limiter")
	if name == "" {
		return h.sources[0], true
	}
	for _, s := range h.sources {
		if s.Name == name {
			return s, true
		}
	}
	return Source{}, false
}

// ruleNamed returns the rule of s named name.
func ruleNamed(s Source, name string) (core.Rule, bool) {
	if s.Rules == nil {
		return core.Rule{}, false
	}
	for _, r := range s.Rules() {
		if r.Name == name {
			return r, true
		}
	}
	return core.Rule{}, false
}

// Quota is one rule's answer to a peek.
type Quota struct {
	Limiter    string `json:"limiter,omitempty"`
	Rule       string `json:"rule"`
	Identity   string `json:"identity"`
	Limit      string `json:"limit"`
	Capacity   int    `json:"capacity"`
	Remaining  int    `json:"remaining"`
	Allowed    bool   `json:"allowed"`
	RetryAfter int64  `json:"retry_after_ms"`
	ResetAfter int64  `json:"reset_after_ms"`
	Error      string `json:"error,omitempty"`
}

func (h *Handler) peek(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	src, ok := h.source(r)
	if !ok {
		http.Error(w, "no such limiter", http.StatusNotFound)
		return
	}
	id, only := r.URL.Query().Get("identity"), r.URL.Query().Get("rule")
	if id == "" {
		http.Error(w, "want ?identity=I, such as ?identity=ip:127.0.0.1", http.StatusBadRequest)
		return
	}
	if src.Rules == nil {
		http.Error(w, "the page was given no rules to peek by", http.StatusNotFound)
		return
	}
	out := []Quota{}
	for _, rule := range src.Rules() {
		if only != "" && rule.Name != only {
			continue
		}
		q := Quota{Limiter: src.Name, Rule: rule.Name, Identity: id}
		res, err := src.Limiter.Peek(r.Context(), rule, id)
		if err != nil {
			q.Error = err.Error()
		} else {
			q.Limit, q.Capacity, q.Remaining, q.Allowed = res.Limit.String(), res.Limit.Capacity(), res.Remaining, res.Allowed
			q.RetryAfter, q.ResetAfter = res.RetryAfter.Milliseconds(), res.ResetAfter.Milliseconds()
		}
		out = append(out, q)
	}
	if only != "" && len(out) == 0 {
		http.Error(w, "no rule named "+only, http.StatusNotFound)
		return
	}
	writeJSON(w, out)
}

// write serves reset and override: POST, the token, the same origin.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, action string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := h.cross.Check(r); err != nil {
		http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
		return
	}
	if h.opts.Token == "" {
		http.Error(w, "the page is read-only: it was given no token", http.StatusForbidden)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+h.opts.Token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ratekit live page"`)
		http.Error(w, "a write needs Authorization: Bearer <token>", http.StatusUnauthorized)
		return
	}
	src, ok := h.source(r)
	if !ok {
		http.Error(w, "no such limiter", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	rule, ok := ruleNamed(src, q.Get("rule"))
	id := q.Get("identity")
	if !ok || id == "" {
		http.Error(w, "want ?rule=R&identity=I of a rule the page was given", http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	var err error
	switch {
	case action == "reset":
		err = src.Limiter.Reset(ctx, rule.Name, id)
	case q.Get("clear") == "1":
		err = src.Limiter.ClearOverride(ctx, rule.Name, id)
	default:
		var l core.Limit
		var ttl time.Duration
		if l, ttl, err = overrideOf(q.Get); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err = src.Limiter.SetOverride(ctx, rule, id, l, ttl)
	}
	switch {
	case errors.Is(err, core.ErrInvalidLimit):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// overrideOf reads an override's limit and ttl from a query.
func overrideOf(get func(string) string) (core.Limit, time.Duration, error) {
	rate, err := strconv.Atoi(get("rate"))
	if err != nil {
		return core.Limit{}, 0, fmt.Errorf("want rate=N: %w", err)
	}
	period, err := time.ParseDuration(get("period"))
	if err != nil {
		return core.Limit{}, 0, fmt.Errorf("want period=D, a Go duration: %w", err)
	}
	l := core.Limit{Rate: rate, Period: period, Burst: rate}
	if b := get("burst"); b != "" {
		if l.Burst, err = strconv.Atoi(b); err != nil {
			return core.Limit{}, 0, fmt.Errorf("burst: %w", err)
		}
	}
	var ttl time.Duration
	if t := get("ttl"); t != "" {
		if ttl, err = time.ParseDuration(t); err != nil {
			return core.Limit{}, 0, fmt.Errorf("ttl: %w", err)
		}
	}
	return l, ttl, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(v) // an error means the client is gone
}

func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	writeJSON(w, h.Status(ctx))
}
