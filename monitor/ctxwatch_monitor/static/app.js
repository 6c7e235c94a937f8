// ctxwatch monitor live page: polls the JSON API and redraws, top to bottom, the selected loop (its
// status, last refusal, counts and an SVG chart of d_t and r_t with d < r shaded and the onset, flag and
// halt cycles marked), the alarms, the fleet by status and the loop list. No dependencies.
"use strict";

// Deep links (docs/monitor.md, "Live page"): ?loop=ID selects a loop (shown on top), ?agent=NAME,
// ?service=NAME and ?state=STATUS filter the alarms and the loop list; ?refresh=MS sets the poll interval.
const PARAMS = new URLSearchParams(location.search);
const REFRESH_MS = Number(PARAMS.get("refresh")) || 2000;
const SVG_NS = "http://www.w3.org/2000/svg";
const STATUSES = ["healthy", "refusing", "contracting", "blocked", "halted", "idle"];
const page = {
  token: null, selected: PARAMS.get("loop"), timer: null,
  filters: { agent: PARAMS.get("agent") || "", service: PARAMS.get("service") || "", state: PARAMS.get("state") || "" },
};

function readToken() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem("ctxwatch-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  page.token = sessionStorage.getItem("ctxwatch-token");
}

async function api(path) {
  const headers = page.token ? { Authorization: "Bearer " + page.token } : {};
  const response = await fetch(path, { headers, cache: "no-store" });
  if (response.status === 401) {
    document.getElementById("token-form").hidden = false;
    throw new Error("a bearer token is required");
  }
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response.json();
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function ago(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  return s < 60 ? Math.round(s) + " s ago" : s < 3600 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
}

function renderFleet(fleet) {
  document.getElementById("loops-tracked").textContent = "(" + fleet.loops_tracked + " loops tracked)";
  const groups = new Map();
  for (const row of fleet.status_rows) {
    const key = row.agent + "\u0000" + row.service;
    const group = groups.get(key) || { agent: row.agent, service: row.service };
    group[row.status] = (group[row.status] || 0) + row.loops;
    groups.set(key, group);
  }
  const body = document.querySelector("#fleet tbody");
  body.replaceChildren(...[...groups.values()].map((g) => {
    const tr = el("tr", { "data-agent": g.agent });
    tr.append(el("td", {}, g.agent || "(none)"), el("td", {}, g.service || "(none)"),
      ...STATUSES.map((s) => el("td", { class: g[s] ? "state-" + s : "", "data-status": s }, g[s] || 0)));
    return tr;
  }));
}

// The last refusal in one line: decision, invariant ids, kind, counts (never content).
function refusalText(r) {
  if (!r) return "";
  const parts = [r.decision + " by " + (r.invariants.length ? r.invariants.join(", ") : "(no invariant)"), "on " + r.kind];
  if (r.orphans_tool_use || r.orphans_tool_result) parts.push("orphans " + r.orphans_tool_use + " tool_use + " +
    r.orphans_tool_result + " tool_result");
  if (r.pass_cap !== null) parts.push("pass " + r.pass_number + "/" + r.pass_cap);
  if (r.literals_lost) parts.push(r.literals_lost + "/" + r.literals_before + " literals lost");
  if (r.error_type) parts.push(r.error_type);
  return parts.join(", ") + " (" + ago(r.time) + ")";
}

function stateText(a) {
  if (a.status === "idle") return "idle" + (a.before_idle ? " (was " + a.before_idle + ")" : "");
  return a.status;
}

function renderAlarms(data) {
  document.getElementById("alarm-retention").textContent =
    "(stopped and resolved ones stay " + (data.retention < 120 ? Math.round(data.retention) + " s)" :
      Math.round(data.retention / 60) + " min)");
  const list = document.getElementById("alarms");
  const alarms = [...data.alarms];
  const at = alarms.findIndex((a) => a.loop_id === page.selected);
  if (at > 0) alarms.unshift(...alarms.splice(at, 1));  // the selected loop on top
  if (!alarms.length) {
    list.replaceChildren(el("li", { class: "none" }, "no loop is alarming"));
    return;
  }
  list.replaceChildren(...alarms.map((a) => {
    const li = el("li", { "data-loop-id": a.loop_id, "data-status": a.status, "data-alarm": a.alarm });
    if (a.loop_id === page.selected) li.classList.add("selected");
    const detail = a.status === "contracting" || a.before_idle === "contracting"
      ? "contracting since cycle " + a.onset + ", flagged at cycle " + a.flagged_cycle
      : a.blocked_reason || "";
    li.append(el("span", { class: "badge state-" + a.status }, stateText(a)),
      el("span", {}, (a.alarm === "active" ? "" : "[" + a.alarm + "] ") + a.loop_id + " (" + (a.agent || "no agent") +
        ", " + (a.service || "no service") + ")" + (detail ? ": " + detail : "") + ", last seen " + ago(a.last_seen)),
      el("span", { class: "refusal" }, a.last_refusal ? "last refusal: " + refusalText(a.last_refusal) : ""));
    li.addEventListener("click", () => select(a.loop_id));
    return li;
  }));
}

// What the loop's rewrites cost the provider's prompt cache (docs/telemetry.md, "What rewrites cost").
function cacheText(cache) {
  const n = (v) => v.toLocaleString("en-US");
  return n(cache.invalidated_tokens) + " / " + n(cache.read_tokens);
}

function renderLoops(loops) {
  const body = document.querySelector("#loops tbody");
  body.replaceChildren(...loops.map((loop) => {
    const tr = el("tr", { "data-loop-id": loop.loop_id, "data-state": loop.state, "data-status": loop.status });
    if (loop.loop_id === page.selected) tr.classList.add("selected");
    tr.append(el("td", {}, loop.loop_id), el("td", {}, loop.agent), el("td", {}, loop.service),
      el("td", { class: "state-" + loop.status }, stateText(loop)), el("td", {}, loop.cycles),
      el("td", {}, loop.onset === null ? "" : loop.onset),
      el("td", { class: "refusal-cell" }, refusalText(loop.last_refusal)),
      el("td", { class: "cache-cell", "data-invalidated": loop.cache.invalidated_tokens,
        "data-read": loop.cache.read_tokens }, cacheText(loop.cache)), el("td", {}, ago(loop.last_seen)));
    tr.addEventListener("click", () => select(loop.loop_id));
    return tr;
  }));
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function renderChart(loop) {
  const chart = document.getElementById("chart");
  const W = 720, H = 300, L = 48, R = 16, T = 16, B = 36;
  const points = loop.history.filter((c) => c.cycle !== null);
  document.getElementById("loop-title").textContent = loop.loop_id + " — " + stateText(loop) +
    (loop.onset !== null ? " (onset cycle " + loop.onset + ")" : "");
  chart.setAttribute("data-status", loop.status);
  renderFacts(loop);
  chart.setAttribute("data-loop-id", loop.loop_id);
  chart.setAttribute("data-points", String(points.length));
  const nodes = [];
  const first = points.length ? points[0].cycle : 1;
  const last = points.length ? points[points.length - 1].cycle : 1;
  const x = (c) => L + (last === first ? 0.5 : (c - first) / (last - first)) * (W - L - R);
  const y = (v) => T + (1 - v) * (H - T - B);
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    nodes.push(svg("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    nodes.push(svg("text", { x: L - 8, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(2)));
  }
  const step = points.length > 1 ? (W - L - R) / (last - first) : W - L - R;
  for (const p of points) {
    if (p.d !== null && p.r !== null && p.d < p.r) {
      const x0 = Math.max(L, x(p.cycle) - step / 2), x1 = Math.min(W - R, x(p.cycle) + step / 2);
      nodes.push(svg("rect", { class: "below", x: x0, y: T, width: x1 - x0, height: H - T - B, "data-cycle": p.cycle }));
    }
  }
  nodes.push(svg("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  nodes.push(svg("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  nodes.push(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "rewrite cycle"));
  for (const p of points) {
    nodes.push(svg("text", { x: x(p.cycle), y: H - B + 14, "text-anchor": "middle" }, p.cycle));
  }
  const line = (key, cls) => {
    const pts = points.filter((p) => p[key] !== null);
    if (!pts.length) return;
    const d = pts.map((p, i) => (i ? "L" : "M") + x(p.cycle).toFixed(1) + " " + y(p[key]).toFixed(1)).join(" ");
    nodes.push(svg("path", { id: key + "-line", class: cls, d, "data-points": pts.length }));
    for (const p of pts) nodes.push(svg("circle", { cx: x(p.cycle), cy: y(p[key]), r: 3, class: cls }));
  };
  line("d", "d-line");
  line("r", "r-line");
  if (loop.onset !== null && loop.onset >= first && loop.onset <= last) {
    nodes.push(svg("line", { id: "onset-marker", class: "onset", x1: x(loop.onset), x2: x(loop.onset), y1: T,
      y2: H - B, "data-cycle": loop.onset }));
    nodes.push(svg("text", { x: x(loop.onset) + 4, y: T + 10 }, "onset " + loop.onset));
  }
  const mark = (cycle, id, cls, label, dy) => {
    if (cycle === null || cycle < first || cycle > last) return;
    nodes.push(svg("line", { id, class: cls, x1: x(cycle), x2: x(cycle), y1: T, y2: H - B, "data-cycle": cycle }));
    const right = x(cycle) > W / 2;  // the label on the side with room
    nodes.push(svg("text", { x: x(cycle) + (right ? -4 : 4), y: T + dy, "text-anchor": right ? "end" : "start" },
      label + " " + cycle));
  };
  mark(loop.flagged_cycle, "flag-marker", "flag", "flagged", 24);
  const halt = points.filter((p) => p.decision === "halt").pop();
  mark(halt ? halt.cycle : null, "halt-marker", "halt", "halted", 38);
  chart.replaceChildren(...nodes);
}

function renderFacts(loop) {
  const facts = document.getElementById("loop-facts");
  const when = (t) => (t === null ? "—" : ago(t));
  const rows = [["state", stateText(loop) + (loop.blocked_reason ? ": " + loop.blocked_reason : "")],
    ["agent / service", (loop.agent || "—") + " / " + (loop.service || "—")],
    ["flagged", loop.alarm_time === null ? "—" : "cycle " + loop.flagged_cycle + ", " + ago(loop.alarm_time)],
    ["halted", when(loop.halted_time)], ["blocked", when(loop.blocked_time)], ["last seen", ago(loop.last_seen)],
    ["last refusal", refusalText(loop.last_refusal) || "none"],
    ["prompt cache", cacheText(loop.cache) + " tokens invalidated / read (" +
      loop.cache.invalidated_chars.toLocaleString("en-US") + " characters invalidated, " +
      loop.cache.creation_tokens.toLocaleString("en-US") + " tokens written)"],
    ["orphans", loop.counts.orphans_left + " left by applied rewrites, " + loop.counts.orphans_refused +
      " refused"],
    ["by invariant", Object.entries(loop.counts.by_invariant).map(([inv, per]) =>
      inv + ": " + Object.entries(per).map(([d, n]) => n + " " + d).join(", ")).join("; ") || "none"]];
  const table = el("table", { id: "loop-facts-table" });
  for (const [k, v] of rows) {
    const tr = el("tr", { "data-fact": k });
    tr.append(el("th", {}, k), el("td", {}, v));
    table.append(tr);
  }
  facts.replaceChildren(table);
}

async function select(loopId) {
  page.selected = loopId;
  updateUrl();
  await refresh();
}

function query() {
  const q = new URLSearchParams();
  if (page.filters.agent) q.set("agent", page.filters.agent);
  if (page.filters.service) q.set("service", page.filters.service);
  if (page.filters.state) q.set("status", page.filters.state);
  return q.toString();
}

function updateUrl() {
  const q = new URLSearchParams(query());
  if (q.has("status")) { q.set("state", q.get("status")); q.delete("status"); }
  if (page.selected) q.set("loop", page.selected);
  if (PARAMS.get("refresh")) q.set("refresh", PARAMS.get("refresh"));
  history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : ""));
}

async function refresh() {
  try {
    const filter = query();
    const [fleet, alarms, loops] = await Promise.all([api("/api/fleet"), api("/api/alarms?" + filter),
      api("/api/loops?limit=50&" + filter)]);
    renderFleet(fleet);
    renderAlarms(alarms);
    if (!page.selected) {
      page.selected = alarms.alarms.length ? alarms.alarms[0].loop_id : loops.loops.length ? loops.loops[0].loop_id : null;
    }
    renderLoops(loops.loops);
    if (page.selected) {
      try {
        renderChart(await api("/api/loops/" + encodeURIComponent(page.selected)));
      } catch (err) {
        page.selected = null;  // the loop was evicted: pick another on the next refresh
        throw err;
      }
    }
    const status = document.getElementById("status");
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.setAttribute("data-refreshes", String(Number(status.getAttribute("data-refreshes") || 0) + 1));
  } catch (err) {
    document.getElementById("status").textContent = String(err.message || err);
  }
}

const filterForm = document.getElementById("filters");
for (const name of ["agent", "service", "state"]) document.getElementById("filter-" + name).value = page.filters[name];
filterForm.addEventListener("submit", (event) => {
  event.preventDefault();
  for (const name of ["agent", "service", "state"]) page.filters[name] = document.getElementById("filter-" + name).value.trim();
  updateUrl();
  refresh();
});
document.getElementById("filter-clear").addEventListener("click", () => {
  page.filters = { agent: "", service: "", state: "" };
  for (const name of ["agent", "service", "state"]) document.getElementById("filter-" + name).value = "";
  updateUrl();
  refresh();
});

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem("ctxwatch-token", document.getElementById("token-input").value);
  page.token = sessionStorage.getItem("ctxwatch-token");
  document.getElementById("token-form").hidden = true;
  refresh();
});

readToken();
refresh();
page.timer = setInterval(refresh, REFRESH_MS);
