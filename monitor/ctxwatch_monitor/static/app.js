// ctxwatch monitor live page: polls the JSON API and redraws the fleet table, the alarms, the loop
// list and an SVG chart of d_t against r_t (onset marked) for the selected loop. No dependencies.
"use strict";

// Deep links (from the Grafana boards): ?loop=ID selects a loop, ?agent=NAME lists only that agent's loops.
const PARAMS = new URLSearchParams(location.search);
const REFRESH_MS = Number(PARAMS.get("refresh")) || 2000;
const SVG_NS = "http://www.w3.org/2000/svg";
const page = { token: null, selected: PARAMS.get("loop"), agent: PARAMS.get("agent"), timer: null };

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
  for (const row of fleet.rows) {
    const key = row.agent + "\u0000" + row.service;
    const group = groups.get(key) || { agent: row.agent, service: row.service, healthy: 0, contracting: 0 };
    group[row.state] = (group[row.state] || 0) + row.loops;
    groups.set(key, group);
  }
  const body = document.querySelector("#fleet tbody");
  body.replaceChildren(...[...groups.values()].map((g) => {
    const tr = el("tr", { "data-agent": g.agent });
    tr.append(el("td", {}, g.agent || "(none)"), el("td", {}, g.service || "(none)"),
      el("td", { class: "state-healthy" }, g.healthy), el("td", { class: "state-contracting" }, g.contracting));
    return tr;
  }));
}

function renderAlarms(alarms) {
  const list = document.getElementById("alarms");
  if (!alarms.length) {
    list.replaceChildren(el("li", { class: "none" }, "no loop is contracting"));
    return;
  }
  list.replaceChildren(...alarms.map((a) => {
    const li = el("li", { "data-loop-id": a.loop_id, class: "state-contracting" },
      a.loop_id + " (" + (a.agent || "no agent") + "): contracting since cycle " + a.onset +
      ", flagged at cycle " + a.flagged_cycle);
    li.addEventListener("click", () => select(a.loop_id));
    return li;
  }));
}

function renderLoops(loops) {
  const body = document.querySelector("#loops tbody");
  body.replaceChildren(...loops.map((loop) => {
    const tr = el("tr", { "data-loop-id": loop.loop_id, "data-state": loop.state });
    if (loop.loop_id === page.selected) tr.classList.add("selected");
    tr.append(el("td", {}, loop.loop_id), el("td", {}, loop.agent), el("td", {}, loop.service),
      el("td", { class: "state-" + loop.state }, loop.state), el("td", {}, loop.cycles),
      el("td", {}, loop.onset === null ? "" : loop.onset), el("td", {}, ago(loop.last_seen)));
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
  document.getElementById("loop-title").textContent = loop.loop_id + " — " + loop.state +
    (loop.onset !== null ? " (onset cycle " + loop.onset + ")" : "");
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
  chart.replaceChildren(...nodes);
}

async function select(loopId) {
  page.selected = loopId;
  await refresh();
}

async function refresh() {
  try {
    const agentFilter = page.agent ? "&agent=" + encodeURIComponent(page.agent) : "";
    const [fleet, alarms, loops] = await Promise.all([api("/api/fleet"), api("/api/alarms"),
      api("/api/loops?limit=50" + agentFilter)]);
    renderFleet(fleet);
    renderAlarms(alarms.alarms);
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
