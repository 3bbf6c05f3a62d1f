// artoo web console: read-only pages over the JSON API, live by server-sent events.
// No framework, no asset from the internet; every text goes in through textContent.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const main = document.getElementById("main");
const liveBadge = document.getElementById("live");
let page = { name: "", id: "", onEvent: null };
let refreshTimer = null;

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    el.appendChild(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function clock(ts) {
  if (!ts) return "-";
  const d = new Date(ts * 1000);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}
function age(sec) {
  for (const [u, n] of [["d", 86400], ["h", 3600], ["m", 60]]) if (sec >= n) return Math.round(sec / n) + u;
  return Math.round(sec) + "s";
}
function num(v, digits = 3) { return typeof v === "number" ? v.toFixed(digits) : "-"; }
function badge(text) { return h("span", { class: "badge " + String(text || "").replace(/[^a-z_]/gi, "") }, text || "-"); }
function table(cols, rows, onclick) {
  return h("table", {},
    h("thead", {}, h("tr", {}, cols.map(c => h("th", { class: c.num ? "num" : null }, c.title)))),
    h("tbody", {}, rows.map(r => h("tr", { class: onclick ? "click" : null, onclick: onclick ? () => onclick(r) : null },
      cols.map(c => h("td", { class: c.num ? "num" : null }, c.get(r)))))));
}
function setMain(...kids) { main.replaceChildren(...kids); }
function scheduleRefresh(fn, ms = 800) {
  if (refreshTimer) return;
  refreshTimer = setTimeout(() => { refreshTimer = null; fn(); }, ms);
}

// -- tasks ------------------------------------------------------------------------------------
const taskFilters = { state: "all", status: "", q: "" };

async function showTasks() {
  const qs = new URLSearchParams(taskFilters).toString();
  let rows;
  try { rows = await api("/api/tasks?" + qs); } catch (e) { return setMain(h("p", { class: "err" }, e.message)); }
  if (page.name !== "tasks") return;
  const state = h("select", { id: "f-state", onchange: e => { taskFilters.state = e.target.value; showTasks(); } },
    ["all", "running", "finished", "lost", "pending", "in_progress", "blocked", "review", "completed",
     "failed", "rejected", "cancelled", "archived"].map(v => h("option", { value: v, selected: v === taskFilters.state ? "" : null }, v)));
  const status = h("input", { id: "f-status", placeholder: "status (verified, abandoned…)", value: taskFilters.status,
    onchange: e => { taskFilters.status = e.target.value.trim(); showTasks(); } });
  const q = h("input", { id: "f-q", placeholder: "search goal / id / workspace", value: taskFilters.q,
    onchange: e => { taskFilters.q = e.target.value.trim(); showTasks(); } });
  const cols = [
    { title: "run", get: r => h("a", { href: "#/task/" + encodeURIComponent(r.id), class: "mono" }, r.id) },
    { title: "state", get: r => badge(r.lifecycle + (r.state === "lost" ? " (lost)" : "")) },
    { title: "status", get: r => badge(r.status) },
    { title: "age", num: true, get: r => age(r.age_s) },
    { title: "LLM calls", num: true, get: r => r.cost.total.calls },
    { title: "tokens", num: true, get: r => r.cost.total.prompt_tokens + r.cost.total.completion_tokens },
    { title: "LLM s", num: true, get: r => r.cost.total.seconds.toFixed(1) },
    { title: "workspace", get: r => h("span", { class: "mono" }, r.workspace || "-") },
    { title: "goal", get: r => r.goal },
  ];
  setMain(h("h1", {}, "Tasks"), h("div", { class: "filters" }, "state", state, status, q,
    h("span", { class: "muted" }, `${rows.length} run(s)`)),
    rows.length ? table(cols, rows, r => { location.hash = "#/task/" + encodeURIComponent(r.id); })
                : h("p", { class: "muted" }, "no runs"));
  main.querySelector("table")?.setAttribute("id", "tasks-table");
}

// -- one task ---------------------------------------------------------------------------------
const SERIES = [["d", "D"], ["p", "P"], ["omega", "Ω"], ["l", "L"]];

function ggsChart(points) {
  const W = 760, H = 280, L = 70, R = 70, T = 34, B = 36;
  const maxV = Math.max(1, ...points.flatMap(p => SERIES.map(([k]) => typeof p[k] === "number" ? p[k] : 0)));
  const n = points.length;
  const x = i => n <= 1 ? L + (W - L - R) / 2 : L + i * (W - L - R) / (n - 1);
  const y = v => T + (H - T - B) * (1 - v / maxV);
  const svg = s("svg", { id: "ggs-chart", class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`,
    role: "img", "aria-label": "GGS D, P, Omega and L per round", "data-rounds": n });
  for (let k = 0; k <= 4; k++) {
    const v = maxV * k / 4;
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
  }
  svg.append(s("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }),
    s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  points.forEach((p, i) => {
    svg.append(s("text", { x: x(i), y: H - B + 16, "text-anchor": "middle" }, "round " + p.round));
    svg.append(s("text", { class: "directive ggs-directive", x: x(i), y: T - 12, "text-anchor": "middle",
      "data-round": p.round }, p.directive || "?"));
  });
  for (const [key, label] of SERIES) {
    const pts = points.map((p, i) => [i, p[key]]).filter(([, v]) => typeof v === "number");
    if (pts.length > 1) svg.append(s("polyline", { class: "s-" + key, points: pts.map(([i, v]) => `${x(i)},${y(v)}`).join(" ") }));
    for (const [i, v] of pts) {
      svg.append(s("circle", { class: "ggs-point s-" + key, "data-series": label, "data-round": points[i].round,
        cx: x(i), cy: y(v), r: 4 }, s("title", {}, `round ${points[i].round}: ${label} = ${v.toFixed(3)} (${points[i].directive})`)));
    }
  }
  const legend = h("div", { class: "legend" }, SERIES.map(([key, label]) =>
    h("span", {}, h("i", { style: null, class: "lg-" + key }), label)));
  legend.querySelectorAll("i").forEach((el, j) => { el.style.background = ["#c53030", "#2f6fde", "#b7791f", "#1d2330"][j]; });
  return h("div", {}, svg, legend);
}

function laneChart(items, lanesOf) {
  // a swimlane per role: one dot per event at its time since the first
  const roles = [...new Set(items.map(lanesOf))];
  const W = 760, lane = 22, L = 90, R = 16, T = 10;
  const H = T + roles.length * lane + 24;
  const maxT = Math.max(0.001, ...items.map(e => e.t));
  const x = t => L + (W - L - R) * t / maxT;
  const svg = s("svg", { id: "timeline-chart", class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}` });
  roles.forEach((r, i) => {
    const yy = T + i * lane + lane / 2;
    svg.append(s("text", { class: "lane-label", x: L - 8, y: yy + 4, "text-anchor": "end" }, r),
      s("line", { class: "grid", x1: L, x2: W - R, y1: yy, y2: yy }));
  });
  items.forEach(e => {
    const yy = T + roles.indexOf(lanesOf(e)) * lane + lane / 2;
    svg.append(s("circle", { class: "tl-point", cx: x(e.t), cy: yy, r: 3.5, fill: "#2f6fde" },
      s("title", {}, `+${e.t.toFixed(3)}s ${lanesOf(e)} ${e.kind || e.type}`)));
  });
  svg.append(s("text", { x: L, y: H - 6 }, "0 s"), s("text", { x: W - R, y: H - 6, "text-anchor": "end" }, maxT.toFixed(2) + " s"));
  return svg;
}

async function showTask(id) {
  let d;
  try { d = await api("/api/tasks/" + encodeURIComponent(id)); } catch (e) { return setMain(h("h1", {}, id), h("p", { class: "err" }, e.message)); }
  if (page.name !== "task" || page.id !== id) return;
  const parts = [h("h1", {}, h("span", { class: "mono" }, d.id), " ", badge(d.lifecycle), " ", badge(d.status))];
  parts.push(h("div", { class: "kv", id: "task-summary" },
    h("div", {}, "goal"), h("div", {}, d.goal || "-"),
    h("div", {}, "workspace"), h("div", { class: "mono" }, d.workspace || "-"),
    h("div", {}, "started"), h("div", {}, new Date(d.started_at * 1000).toLocaleString() + ` (${age(d.age_s)} ago)`),
    h("div", {}, "lifecycle"), h("div", {}, (d.trail || []).map(t => t.to).join(" → ") || "-"),
    h("div", {}, "cost"), h("div", {}, `${d.cost.total.calls} LLM calls, ${d.cost.total.prompt_tokens + d.cost.total.completion_tokens} tokens, ${d.cost.total.seconds.toFixed(1)} s`)));
  if (d.final) {
    parts.push(h("h2", {}, "Result"), h("div", { class: "kv", id: "task-final" },
      h("div", {}, "outcome"), h("div", {}, badge(d.final.outcome || d.final.status)),
      h("div", {}, "answer"), h("div", {}, h("pre", {}, d.final.answer || d.answer || "-")),
      h("div", {}, "summary"), h("div", {}, h("pre", {}, d.final.summary || d.summary || "-"))));
  }
  parts.push(h("h2", {}, `GGS: D, P, Ω and L per round (${d.ggs_points.length})`));
  parts.push(d.ggs_points.length ? ggsChart(d.ggs_points) : h("p", { class: "muted", id: "ggs-empty" }, "no GGS round yet"));
  if (d.ggs_points.length) parts.push(table([
    { title: "round", get: p => p.round }, { title: "directive", get: p => badge(p.directive) },
    { title: "D", num: true, get: p => num(p.d) }, { title: "P", num: true, get: p => num(p.p) },
    { title: "Ω", num: true, get: p => num(p.omega) }, { title: "L", num: true, get: p => num(p.l) },
    { title: "∇L", num: true, get: p => num(p.grad_l) }, { title: "why", get: p => p.rationale || p.reason || "" }], d.ggs_points));
  parts.push(h("h2", {}, "Plan"));
  for (const p of d.plans) {
    parts.push(h("div", { class: "card plan" }, h("b", {}, `round ${p.round}`),
      h("ol", {}, p.subtasks.map(st => h("li", {}, st.intent, " ", h("span", { class: "muted mono" }, `(${st.id}, step ${st.sequence})`))))));
  }
  if (!d.plans.length) parts.push(h("p", { class: "muted" }, "no plan"));
  parts.push(h("h2", {}, "Subtasks and attempts"));
  const ends = Object.fromEntries(d.subtasks.map(x => [x.subtask_id, x]));
  for (const a of d.attempts) {
    const end = ends[a.subtask_id] || {};
    parts.push(h("div", { class: "card attempt" },
      h("b", { class: "mono" }, a.subtask_id), ` attempt ${a.attempt} `, badge(end.status),
      a.tool_calls.length ? table([{ title: "tool", get: c => c.tool }, { title: "input", get: c => h("code", {}, c.input) },
        { title: "output / error", get: c => h("pre", { class: "mono" }, c.error ? "✗ " + c.error : c.output) },
        { title: "ms", num: true, get: c => c.elapsed_ms ?? "" }], a.tool_calls) : null,
      a.verdicts.map(v => h("div", {}, v.met ? "✓ " : "✗ ", h("b", {}, v.criterion || ""), " ", h("span", { class: "muted" }, v.evidence)))));
  }
  for (const st of d.subtasks) if (!d.attempts.some(a => a.subtask_id === st.subtask_id))
    parts.push(h("div", { class: "card" }, h("b", { class: "mono" }, st.subtask_id), " ", badge(st.status), " ", st.failure_reason || st.reason || ""));
  if (d.approvals.length) {
    parts.push(h("h2", {}, "Approvals"), table([{ title: "time", get: a => clock(a.ts) }, { title: "action", get: a => a.action },
      { title: "command", get: a => h("code", {}, a.command || "") }, { title: "decision", get: a => badge(a.approved ? "ok" : "bad") },
      { title: "by", get: a => a.decided_by }, { title: "reason", get: a => a.reason }], d.approvals));
  }
  parts.push(h("h2", {}, `Timeline (${d.timeline.length} events across processes)`));
  if (d.timeline.length) parts.push(laneChart(d.timeline, e => e.role));
  const tl = table([{ title: "+s", num: true, get: e => e.t.toFixed(3) }, { title: "time", get: e => clock(e.ts) },
    { title: "role", get: e => e.role }, { title: "kind", get: e => e.kind },
    { title: "subtask", get: e => h("span", { class: "mono" }, e.subtask) }, { title: "detail", get: e => e.detail }], d.timeline);
  tl.id = "timeline";
  parts.push(tl);
  if (d.messages.length) {
    parts.push(h("h2", {}, `Bus messages (${d.messages.length}, from the audit log)`));
    const mt = table([{ title: "+s", num: true, get: m => m.t.toFixed(3) }, { title: "type", get: m => m.type },
      { title: "from", get: m => m.from }, { title: "to", get: m => m.to }, { title: "node", get: m => h("span", { class: "mono" }, m.node) },
      { title: "acks", num: true, get: m => m.acks }, { title: "summary", get: m => m.summary }], d.messages);
    mt.id = "messages";
    parts.push(mt);
  }
  setMain(...parts);
  page.onEvent = ev => { if (ev.task === id && ev.type !== "Heartbeat") scheduleRefresh(() => page.name === "task" && showTask(id), 1200); };
}

// -- daemon -----------------------------------------------------------------------------------
const rates = {};
async function showDaemon() {
  setMain(h("h1", {}, "Daemon"), h("p", { class: "muted" }, "listening to heartbeats…"));
  let d;
  try { d = await api("/api/daemon"); } catch (e) { return setMain(h("h1", {}, "Daemon"), h("p", { class: "err" }, e.message)); }
  if (page.name !== "daemon") return;
  const rows = d.roles || [];
  const t = table([{ title: "role", get: r => r.role }, { title: "inst", num: true, get: r => r.instance },
    { title: "state", get: r => badge(r.alive ? "alive" : "missing") }, { title: "pid", num: true, get: r => r.pid ?? "-" },
    { title: "uptime", num: true, get: r => r.uptime_s ? age(r.uptime_s) : "-" },
    { title: "gaps", num: true, get: r => r.gaps ?? "" }, { title: "rejects", num: true, get: r => r.rejected ?? "" },
    { title: "unacked", num: true, get: r => r.unacked ?? "" }, { title: "in flight", num: true, get: r => r.in_flight ?? "" },
    { title: "last beat", get: r => h("span", { class: "beat", "data-key": `${r.role}/${r.instance}` }, "-") }], rows);
  t.id = "roles-table";
  const ratesBox = h("div", { id: "rates" });
  const ticker = h("tbody", { id: "ticker" });
  setMain(h("h1", {}, "Daemon ", badge(d.bus === "up" ? "ok" : "bad")),
    h("div", { class: "kv" }, h("div", {}, "home"), h("div", { class: "mono" }, d.home),
      h("div", {}, "supervisord"), h("div", {}, d.supervisord_pid ?? "not running"),
      h("div", {}, "bus"), h("div", {}, d.bus), h("div", {}, "signing"), h("div", {}, d.bus_signing || "-"),
      h("div", {}, "hot path"), h("div", {}, d.bus_hot_path || "-"),
      h("div", {}, "alive"), h("div", {}, `${rows.filter(r => r.alive).length} of ${rows.length} instances`)),
    h("h2", {}, "Roles and instances"), t,
    h("h2", {}, "Proxy counters"), h("div", { class: "kv", id: "proxy" },
      ...Object.entries(d.proxy || {}).flatMap(([k, v]) => [h("div", {}, k), h("div", { class: "mono" }, String(v))])),
    h("h2", {}, "Bus rates (messages/s over the last 10 s, live)"), ratesBox,
    h("h2", {}, "Live messages"), h("table", {}, h("thead", {}, h("tr", {}, ["time", "type", "from", "task", "summary"].map(x => h("th", {}, x)))), ticker));
  const drawRates = () => {
    const now = Date.now() / 1000;
    const counts = {};
    for (const [type, list] of Object.entries(rates)) {
      rates[type] = list.filter(ts => now - ts < 10);
      if (rates[type].length) counts[type] = rates[type].length / 10;
    }
    ratesBox.replaceChildren(table([{ title: "type", get: r => r[0] }, { title: "msg/s", num: true, get: r => r[1].toFixed(1) }],
      Object.entries(counts).sort((a, b) => b[1] - a[1])));
  };
  drawRates();
  const timer = setInterval(() => page.name === "daemon" ? drawRates() : clearInterval(timer), 1000);
  page.onEvent = ev => {
    if (ev.type === "Heartbeat") {
      const el = main.querySelector(`.beat[data-key="${ev.from}/${ev.instance}"]`);
      if (el) el.textContent = clock(ev.ts);
      return;
    }
    if (ev.type === "Ack") return;
    ticker.prepend(h("tr", {}, h("td", {}, clock(ev.ts)), h("td", {}, ev.type), h("td", {}, ev.from), h("td", { class: "mono" }, ev.task), h("td", {}, ev.summary)));
    while (ticker.children.length > 50) ticker.lastChild.remove();
  };
}

// -- audit log --------------------------------------------------------------------------------
const auditFilters = { type: "", task: "", role: "", since: "1h", until: "", grep: "" };
async function showAudit() {
  const inputs = Object.keys(auditFilters).map(k => h("input", { id: "a-" + k, placeholder: k, value: auditFilters[k], size: k === "task" ? 24 : 10,
    onchange: e => { auditFilters[k] = e.target.value.trim(); showAudit(); } }));
  const qs = new URLSearchParams(Object.entries(auditFilters).filter(([, v]) => v)).toString();
  const verifyBox = h("span", { id: "verify" }, "verifying the chain…");
  const body = h("div", {}, h("p", { class: "muted" }, "reading…"));
  setMain(h("h1", {}, "Audit log"), h("p", {}, "hash chain: ", verifyBox), h("div", { class: "filters" }, inputs), body);
  api("/api/audit/verify").then(v => {
    verifyBox.replaceChildren(!v.available ? h("span", { class: "muted" }, "no audit log")
      : v.ok ? h("span", {}, badge("ok"), ` ${v.records} records in ${v.segments} segment(s), intact up to seq ${v.last_seq}`)
             : h("span", { class: "err" }, badge("bad"), ` first bad record: seq ${v.first_bad_seq} in ${v.segment} (${v.reason})`));
  }).catch(e => verifyBox.replaceChildren(h("span", { class: "err" }, e.message)));
  let r;
  try { r = await api("/api/audit?" + qs); } catch (e) { return body.replaceChildren(h("p", { class: "err" }, e.message)); }
  if (page.name !== "audit") return;
  if (!r.available) return body.replaceChildren(h("p", { class: "muted" }, `no audit log under ${r.directory}`));
  const t = table([{ title: "seq", num: true, get: x => x.seq }, { title: "time", get: x => clock(x.ts) },
    { title: "type", get: x => x.type }, { title: "from", get: x => x.from }, { title: "to", get: x => x.to },
    { title: "task", get: x => x.task && x.task !== "-" ? h("a", { href: "#/task/" + encodeURIComponent(x.task), class: "mono" }, x.task) : "" },
    { title: "summary", get: x => x.summary }], r.records);
  t.id = "audit-table";
  body.replaceChildren(h("p", { class: "muted" }, `${r.records.length} newest matching message(s)`), t);
}

// -- memory -----------------------------------------------------------------------------------
const memFilters = { space: "", entity: "" };
async function showMemory() {
  const inputs = Object.keys(memFilters).map(k => h("input", { id: "m-" + k, placeholder: k, value: memFilters[k],
    onchange: e => { memFilters[k] = e.target.value.trim(); showMemory(); } }));
  const body = h("div", {}, h("p", { class: "muted" }, "asking the memory process…"));
  setMain(h("h1", {}, "Memory"), h("div", { class: "filters" }, inputs), body);
  let r;
  try { r = await api("/api/memory?" + new URLSearchParams(memFilters)); } catch (e) { return body.replaceChildren(h("p", { class: "err" }, e.message)); }
  if (page.name !== "memory") return;
  const t = table([{ title: "space", get: g => g.space }, { title: "entity", get: g => g.entity },
    ...["M", "K", "C", "T"].map(l => ({ title: l, num: true, get: g => (g.levels || {})[l] || "" })),
    { title: "attention", num: true, get: g => num(g.attention) }, { title: "decision", num: true, get: g => num(g.decision) },
    { title: "action", get: g => badge(g.action) }], r.groups,
    g => { memFilters.space = g.space; memFilters.entity = g.entity; showMemory(); });
  t.id = "memory-table";
  const parts = [h("p", { class: "muted" }, `${r.groups.length} tag(s); click one for its Megrams`), t];
  if (r.megrams.length) parts.push(h("h2", {}, `Megrams of ${memFilters.space} / ${memFilters.entity}`), table([
    { title: "id", get: m => h("span", { class: "mono" }, m.id.slice(0, 12)) }, { title: "level", get: m => m.level },
    { title: "f", num: true, get: m => num(m.f, 2) }, { title: "σ", num: true, get: m => num(m.sigma, 2) }, { title: "k", num: true, get: m => m.k },
    { title: "created", get: m => new Date(m.created_at * 1000).toLocaleString() }, { title: "content", get: m => m.content }], r.megrams));
  body.replaceChildren(...parts);
}

// -- world model (seed 002) ---------------------------------------------------------------------
const when = ts => ts ? new Date(ts * 1000).toLocaleString() : "";
async function showWorld() {
  const body = h("div", {}, h("p", { class: "muted" }, "asking the world process…"));
  setMain(h("h1", {}, "World"), body);
  let r;
  try { r = await api("/api/world"); } catch (e) { return body.replaceChildren(h("p", { class: "err" }, e.message)); }
  if (page.name !== "world") return;
  const factCols = [{ title: "subject", get: f => h("span", { class: "mono" }, f.subject) }, { title: "predicate", get: f => f.predicate },
    { title: "object", get: f => f.object }, { title: "status", get: f => f.status }, { title: "valid since", get: f => when(f.valid_at) },
    { title: "source", get: f => (f.episodes || []).map(e => e.task).join(", ") }];
  const goals = table([{ title: "id", get: g => h("span", { class: "mono" }, g.id) }, { title: "type", get: g => g.type },
    { title: "status", get: g => badge(g.status === "BLOCKED" ? "proposed" : g.status) }, { title: "priority", num: true, get: g => num(g.priority, 2) },
    { title: "goal", get: g => g.description }, { title: "trigger", get: g => g.trigger }], r.goals);
  goals.id = "world-goals";
  const ents = table([{ title: "entity", get: e => h("span", { class: "mono" }, e.id) }, { title: "kind", get: e => e.kind },
    { title: "mentions", num: true, get: e => e.mentions }, { title: "state", get: e => e.state },
    { title: "importance", num: true, get: e => num(e.importance, 3) },
    { title: "sentiment", num: true, get: e => e.sentiment == null ? "" : num(e.sentiment, 2) },
    { title: "last mentioned", get: e => when(e.last_mentioned) }], r.entities);
  ents.id = "world-entities";
  const facts = table(factCols, r.facts);
  facts.id = "world-facts";
  body.replaceChildren(
    h("h2", {}, `Goals (${r.goals.length}): proposals wait for \`artoo goals accept\``), goals,
    h("h2", {}, `Facts valid now (${r.facts.length}), checked by code`), facts,
    h("h2", {}, `Entities (${r.entities.length})`), ents,
    h("h2", {}, `Claims (${r.claims.length}): never shown as facts`), table(factCols, r.claims));
}

// -- routing and the live feed ----------------------------------------------------------------
function route() {
  const [, name = "tasks", ...rest] = (location.hash || "#/tasks").split("/");
  page = { name: name === "task" ? "task" : name, id: decodeURIComponent(rest.join("/")), onEvent: null };
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active", a.dataset.page === (page.name === "task" ? "tasks" : page.name)));
  if (page.name === "task") showTask(page.id);
  else if (page.name === "daemon") showDaemon();
  else if (page.name === "audit") showAudit();
  else if (page.name === "memory") showMemory();
  else if (page.name === "world") {
    showWorld();
    page.onEvent = ev => { if (["FinalResult", "GoalProposed"].includes(ev.type)) scheduleRefresh(() => page.name === "world" && showWorld(), 1000); };
  }
  else {
    page.name = "tasks";
    showTasks();
    page.onEvent = ev => {
      if (["UserRequest", "TaskSpec", "PlanReady", "FinalResult", "ConversationalReply", "PlanDirective", "ReplanRequest"].includes(ev.type))
        scheduleRefresh(() => page.name === "tasks" && showTasks(), 1000);
    };
  }
}

function connectLive() {
  const es = new EventSource("/events");
  es.onmessage = m => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    if (ev.type === "Heartbeat") rates[ev.type] = (rates[ev.type] || []).concat([Date.now() / 1000]);
    else if (ev.type !== "_console") rates[ev.type] = (rates[ev.type] || []).concat([Date.now() / 1000]);
    if (ev.type === "_console") {
      const on = ev.state === "live";
      liveBadge.className = "live " + (on ? "on" : "off");
      liveBadge.textContent = on ? "live" : (ev.state || "offline");
      liveBadge.title = ev.error || "server-sent events from the bus";
      return;
    }
    if (liveBadge.textContent !== "live") { liveBadge.className = "live on"; liveBadge.textContent = "live"; }
    if (page.onEvent) page.onEvent(ev);
  };
  es.onerror = () => { liveBadge.className = "live off"; liveBadge.textContent = "reconnecting"; };
}

window.addEventListener("hashchange", route);
if (location.search.includes("token=")) history.replaceState(null, "", "/" + (location.hash || "#/tasks"));
route();
connectLive();
