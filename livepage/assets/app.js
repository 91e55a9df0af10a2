// The live page: polls status.json and draws it. Identities and names
// are written as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
let status = null;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function ms(v) {
  if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "s";
  return v + "ms";
}

function sum(a) { return a.reduce((x, y) => x + y, 0); }

// chart draws a rule's decisions per second as lines in an SVG.
function chart(series) {
  const w = 420, h = 110, pad = 22;
  const n = Math.max(series.allowed.length, 2);
  const top = Math.max(1, ...series.allowed, ...series.denied, ...series.shadow_denied);
  const s = svg("svg", {
    class: "chart", width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: "img",
    "data-allowed": sum(series.allowed), "data-denied": sum(series.denied),
    "data-shadow-denied": sum(series.shadow_denied),
  });
  const x = (i) => pad + (i * (w - pad - 4)) / (n - 1);
  const y = (v) => h - 14 - (v * (h - 24)) / top;
  for (const [key, cls] of [["allowed", "a"], ["shadow_denied", "s"], ["denied", "d"]]) {
    const pts = series[key].map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    if (pts) s.append(svg("polyline", { class: cls, points: pts }));
  }
  const label = (tx, ty, text, anchor) => {
    const t = svg("text", { x: tx, y: ty, "text-anchor": anchor || "start" });
    t.textContent = text;
    s.append(t);
  };
  label(2, 12, `${top}/s`);
  label(2, h - 2, `${series.allowed.length}s ago`);
  label(w - 2, h - 2, "now", "end");
  return s;
}

function offendersTable(rule, list, kind) {
  const t = el("table", { class: "offenders", "data-rule": rule.name, "data-kind": kind },
    el("thead", {}, el("tr", {}, el("th", {}, "identity"), el("th", { class: "n" }, kind === "near" ? "near limit" : "denied"), el("th", { class: "n" }, "±"))));
  const body = el("tbody");
  for (const o of list) {
    const tr = el("tr", { class: "pick", title: "look it up" },
      el("td", { class: "identity" }, o.identity), el("td", { class: "n denied-count" }, o.denied), el("td", { class: "n" }, o.error));
    tr.addEventListener("click", () => { $("identity").value = o.identity; $("rule").value = rule.name; });
    body.append(tr);
  }
  if (!list.length) body.append(el("tr", {}, el("td", { colspan: 3, class: "dim" }, "none")));
  t.append(body);
  return t;
}

function drawStore(st) {
  const body = $("store").tBodies[0];
  body.replaceChildren();
  for (const l of st.limiters) {
    body.append(el("tr", {},
      el("td", {}, l.name || "—"),
      el("td", { class: l.breaker === "closed" ? "" : "open", id: "breaker" }, l.breaker),
      el("td", {}, l.failure_policy),
      el("td", { class: "n" }, l.store_calls),
      el("td", { class: "n" }, l.store_errors),
      el("td", { class: "n" }, l.latency_ms.p50 + "ms"),
      el("td", { class: "n" }, l.latency_ms.p90 + "ms"),
      el("td", { class: "n" }, l.latency_ms.p99 + "ms"),
      el("td", { class: "n" }, l.degraded),
      el("td", {}, l.fleet_error ? "error: " + l.fleet_error : (l.fleet ? l.fleet.length + " process(es)" : "this process"))));
  }
}

// drawTables draws the application's own tables (Options.Tables).
function drawTables(st) {
  const box = $("tables");
  box.replaceChildren();
  for (const t of st.tables || []) {
    const body = el("tbody", {});
    for (const row of t.rows) body.append(el("tr", {}, ...row.map((c) => el("td", {}, c))));
    box.append(el("section", {}, el("h2", {}, t.title),
      el("table", {}, el("thead", {}, el("tr", {}, ...t.columns.map((c) => el("th", {}, c)))), body)));
  }
}

function drawRules(st) {
  const box = $("rules");
  box.replaceChildren();
  const sel = $("rule");
  const keep = sel.value;
  sel.replaceChildren();
  for (const r of st.rules) {
    sel.append(el("option", { value: r.name }, r.name));
    const head = el("h3", {}, r.name + " ",
      el("span", { class: "badge" }, r.limit || "limit not seen yet"));
    if (r.shadow) head.append(" ", el("span", { class: "badge shadow" }, "shadow"));
    if (r.limiter) head.append(" ", el("span", { class: "dim" }, "limiter " + r.limiter));
    const counts = el("p", { class: "dim" },
      el("span", { class: "allowed" }, r.allowed + " allowed"), ", ",
      el("span", { class: "denied" }, r.denied + " denied"),
      r.shadow_denied ? `, ${r.shadow_denied} shadow denied` : "",
      r.degraded ? `, ${r.degraded} degraded` : "");
    const tables = el("div", { class: "row" },
      el("div", {}, el("h3", {}, "offenders, this process"), offendersTable(r, r.offenders, "process")));
    if (r.fleet) {
      tables.append(el("div", {}, el("h3", {}, "offenders, fleet ", el("span", { class: "dim" }, "± ≤ " + r.fleet.bound)),
        offendersTable(r, r.fleet.offenders, "fleet")));
    }
    tables.append(el("div", {}, el("h3", {}, "near their limit"), offendersTable(r, r.near, "near")));
    box.append(el("div", { class: "rule", "data-rule": r.name }, head, counts,
      el("div", { class: "row" }, chart(r.series)), tables));
  }
  if (keep) sel.value = keep;
}

async function refresh() {
  try {
    const res = await fetch("status.json", { cache: "no-store" });
    if (!res.ok) throw new Error(res.status + " " + res.statusText);
    status = await res.json();
    $("meta").textContent = `process ${status.process} · ${new Date(status.generated).toLocaleTimeString()} · identities ${status.show_identities ? "shown" : "hashed"} · ${status.writable ? "writes with a token" : "read-only"}`;
    $("lookup-section").hidden = !status.peekable;
    $("writes").hidden = !status.writable;
    drawStore(status);
    drawTables(status);
    drawRules(status);
  } catch (err) {
    $("meta").textContent = "cannot read status.json: " + err.message;
  }
}

async function peek(ev) {
  ev.preventDefault();
  const id = $("identity").value.trim();
  const res = await fetch("peek?identity=" + encodeURIComponent(id), { cache: "no-store" });
  const body = $("quota").tBodies[0];
  body.replaceChildren();
  if (!res.ok) {
    $("result").textContent = "peek: " + (await res.text());
    $("quota").hidden = true;
    return;
  }
  for (const q of await res.json()) {
    body.append(el("tr", { "data-rule": q.rule },
      el("td", {}, q.rule), el("td", {}, q.limit),
      el("td", { class: "n remaining" }, q.remaining),
      el("td", { class: "n" }, ms(q.retry_after_ms)),
      el("td", { class: "n" }, ms(q.reset_after_ms)),
      el("td", {}, q.error || "")));
  }
  $("quota").hidden = false;
  $("result").textContent = "quota of " + id + ", nothing spent";
}

async function write(action, extra) {
  const id = $("identity").value.trim();
  const q = new URLSearchParams({ rule: $("rule").value, identity: id, ...extra });
  const res = await fetch(action + "?" + q, {
    method: "POST", cache: "no-store",
    headers: { Authorization: "Bearer " + $("token").value },
  });
  const msg = res.ok ? `${action}: done for ${id} under ${$("rule").value}` : `${action} refused: ${res.status} ${(await res.text()).trim()}`;
  if (res.ok) await peek(new Event("submit"));
  $("result").textContent = msg;
}

$("lookup").addEventListener("submit", peek);
$("reset").addEventListener("click", () => write("reset", {}));
$("override").addEventListener("click", () => write("override", { rate: $("rate").value, period: $("period").value || "1m", ttl: $("ttl").value || "0s" }));
$("clear").addEventListener("click", () => write("override", { clear: "1" }));
refresh();
setInterval(refresh, 2000);
