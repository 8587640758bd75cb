// Gantt's live view: polls GET v1/overview every POLL_MS and updates the page in place. Plain DOM, no framework,
// nothing fetched from anywhere but this service. Every value from the service goes in as text, never as markup.
//
// In place: each row, heat cell and tile is kept by its key and only its changed text or attributes are written,
// so what a person is doing survives a refresh (a tooltip they hover, a node they selected, text they marked).
// Every address is relative to the page (ui/ → ../v1/…), so the page works behind a proxy's path prefix.
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "gantt-token";
const API = new URL("../", document.baseURI);

const state = {paused: false, held: new Set(), query: "", node: null, last: null, namespaces: []};

// ------------------------------------------------------------------------------------------------ token

function takeTokenFromFragment() {
  // ui/#token=… : kept for this tab (sessionStorage), then dropped from the address bar and the history.
  const params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function showTokenForm(message) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  if (message) form.querySelector("label").textContent = message;
  document.getElementById("token-input").focus();
}

async function call(path, options = {}) {
  const headers = {Accept: "application/json", ...(options.headers || {})};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  return fetch(new URL(path, API), {...options, headers, cache: "no-store"});
}

// ---------------------------------------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name === "style") node.style.cssText = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function attr(node, name, value) {
  // Written only when it changed: a hovered element's title rewritten with the same text stays shown.
  const text = value === null || value === undefined ? null : String(value);
  if (text === null) {
    if (node.hasAttribute(name)) node.removeAttribute(name);
  } else if (node.getAttribute(name) !== text) {
    node.setAttribute(name, text);
  }
}

function text(node, value) {
  const s = String(value);
  if (node.textContent !== s) node.textContent = s;
}

function reconcile(parent, items, key, make, update) {
  // Keep parent's children in the order of items, one per key: existing ones updated in place, new ones made,
  // the rest removed. A child keeps its identity across refreshes as long as its key lives.
  const old = new Map();
  for (const child of parent.children) if (child.dataset.key !== undefined) old.set(child.dataset.key, child);
  let cursor = parent.firstElementChild;
  const keep = new Set();
  for (const item of items) {
    const k = String(key(item));
    let node = old.get(k);
    if (!node) {
      node = make(item);
      node.dataset.key = k;
    }
    update(node, item);
    keep.add(k);
    if (node !== cursor) parent.insertBefore(node, cursor);
    else cursor = cursor.nextElementSibling;
  }
  for (const [k, node] of old) if (!keep.has(k)) node.remove();
  for (const child of [...parent.children]) if (child.dataset.key === undefined) child.remove();
}

function rows(tbody, items, key, columns, cells, empty) {
  // A table body kept by key; each row's cells filled by cells(item) → [[text or node, class], …].
  if (!items.length) {
    tbody.replaceChildren(el("tr", {class: "empty"}, el("td", {colspan: columns}, empty)));
    return;
  }
  reconcile(tbody, items, key, () => el("tr"), (tr, item) => {
    const wanted = cells(item);
    while (tr.children.length < wanted.length) tr.append(el("td"));
    wanted.forEach(([content, cls, extra], i) => {
      const td = tr.children[i];
      attr(td, "class", cls || null);
      if (content instanceof Node) {
        if (td.firstChild !== content && td.dataset.sig !== content.dataset.sig) td.replaceChildren(content);
        td.dataset.sig = content.dataset.sig || "";
      } else {
        text(td, content);
      }
      for (const [name, value] of Object.entries(extra || {})) attr(td, name, value);
    });
    tr.dataset.search = searchText(item);
  });
  applySearch();
}

function setText(id, value) {
  text(document.getElementById(id), value);
}

function number(value) {
  if (value === null || value === undefined) return "–";
  const rounded = Math.abs(value) >= 100 || Number.isInteger(value) ? Math.round(value) : Math.round(value * 10) / 10;
  return rounded.toLocaleString("en-US");
}

function amount(rc, value) {
  // Human units: memory in GiB (MiB below 1 GiB), disk in GiB (TiB from 1,024); every other class as counted.
  if (value === null || value === undefined) return "–";
  if (rc === "MEMORY_MB") {
    if (Math.abs(value) < 1024) return `${number(value)} MiB`;
    const gib = value / 1024;
    return gib >= 1024 ? `${number(gib / 1024)} TiB` : `${number(gib)} GiB`;
  }
  if (rc === "DISK_GB") return Math.abs(value) >= 1024 ? `${number(value / 1024)} TiB` : `${number(value)} GiB`;
  return number(value);
}

function label(rc) {
  return {VCPU: "vCPU", MEMORY_MB: "RAM", DISK_GB: "disk"}[rc] || rc;
}

function resources(map) {
  return Object.entries(map || {}).map(([rc, n]) => `${label(rc)} ${amount(rc, n)}`).join(", ");
}

function percent(fraction) {
  return `${Math.round(fraction * 1000) / 10}%`;
}

function time(iso) {
  if (!iso) return "–";
  return new Date(iso).toLocaleTimeString("en-GB", {hour12: false});
}

function nodeName(host, nodename) {
  return host === nodename ? host : `${host}/${nodename}`;
}

// Viridis, sampled: perceptually even, readable with every common colour-vision deficiency, and monotonic in
// lightness (dark: free, light: full), so the map reads in greyscale too.
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
  [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];

function heatColour(fraction) {
  if (fraction > 1) return "rgb(180, 4, 38)";  // over capacity: outside the scale, and striped by the CSS
  const f = Math.max(0, Math.min(1, fraction)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(f));
  const t = f - i;
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return `rgb(${a.map((v, k) => Math.round(v + (b[k] - v) * t)).join(", ")})`;
}

function bar(parts) {
  const node = el("div", {class: "bar"}, ...parts.map(([f, cls]) =>
    el("span", {class: cls, style: `width:${Math.max(0, Math.min(1, f)) * 100}%`})));
  node.dataset.sig = parts.map(([f, cls]) => `${cls}:${f.toFixed(4)}`).join(",");
  return node;
}

function nodeLink(host, nodename) {
  // A node's name that opens its page in the side panel.
  const link = el("button", {type: "button", class: "node-link", "data-host": host, "data-nodename": nodename},
    nodeName(host, nodename));
  link.dataset.sig = `${host}/${nodename}`;
  return link;
}

// -------------------------------------------------------------------------------------------- search

function searchText(item) {
  return JSON.stringify(item).toLowerCase();
}

function applySearch() {
  const q = state.query;
  for (const tr of document.querySelectorAll("#decisions tbody tr, #refusals tbody tr, #allocations tbody tr")) {
    const match = !q || (tr.dataset.search || "").includes(q);
    if (tr.hidden === match) tr.hidden = !match;
  }
  for (const cell of document.querySelectorAll(".cell")) {
    const hit = q && ((cell.dataset.node || "").toLowerCase().includes(q) ||
      (cell.dataset.zone || "").toLowerCase() === q);
    cell.classList.toggle("hit", Boolean(hit));
    cell.classList.toggle("dim", Boolean(q) && !hit);
  }
  setText("search-note", q ? "showing what matches; Esc clears" : "");
}

// ----------------------------------------------------------------------------------------------- render

function renderSummary(o) {
  const sum = (key) => o.zones.reduce((total, z) => total + z[key], 0);
  setText("hosts-total", number(o.hosts));
  setText("hosts-up", number(sum("up")));
  setText("hosts-disabled", number(sum("disabled")));
  setText("hosts-down", number(sum("down")));
  setText("allocations-total", number(o.allocations));
  setText("placements-total", number(o.counters.placements ?? 0));
  setText("refusals-total", number(o.counters.no_valid_host ?? 0));
}

function renderZones(o) {
  rows(document.querySelector("#zones tbody"), o.zones, (z) => z.zone, 5, (z) => {
    const total = z.up + z.disabled + z.down || 1;
    const zone = el("button", {type: "button", class: "zone-link", "data-zone": z.zone}, z.zone);
    zone.dataset.sig = z.zone;
    return [[zone], [number(z.up), "num up"], [number(z.disabled), "num disabled"], [number(z.down), "num down"],
      [bar([[z.up / total, "up"], [z.disabled / total, "disabled"], [z.down / total, "down"]])]];
  }, "no nodes have reported yet");
}

function renderClasses(o) {
  rows(document.querySelector("#classes tbody"), o.classes, (c) => c.resource_class, 4, (c) => {
    const share = c.capacity > 0 ? c.used / c.capacity : 0;
    const cell = el("div", {class: "share"}, bar([[share, "used"]]), el("span", null, percent(share)));
    cell.dataset.sig = `${share.toFixed(4)}`;
    return [[c.resource_class], [amount(c.resource_class, c.used), "num"],
      [amount(c.resource_class, c.capacity), "num"], [cell]];
  }, "no inventories yet");
}

function renderHeatmap(o) {
  const box = document.getElementById("heatmap");
  const legend = document.getElementById("heat-legend");
  if (!legend.childElementCount) {
    legend.append(
      el("span", {class: "swatch", style: `background:${heatColour(0)}`}), "0%",
      el("span", {class: "swatch", style: `background:${heatColour(0.5)}`}), "50%",
      el("span", {class: "swatch", style: `background:${heatColour(1)}`}), "100%",
      el("span", {class: "swatch over"}), "over",
      el("span", {class: "swatch cell-down"}), "down",
      el("span", {class: "swatch cell-disabled"}), "disabled");
  }
  const shown = o.utilization.length;
  setText("heat-note", o.utilization_omitted
    ? `The ${number(shown)} most used of ${number(o.hosts)} nodes (${number(o.utilization_omitted)} not shown).`
    : `${number(shown)} node${shown === 1 ? "" : "s"}, by zone and name. Hover a cell for its node; click it ` +
      "for its page.");
  if (!shown) {
    box.replaceChildren(el("p", {class: "empty"}, "no nodes yet"));
    return;
  }
  const blocks = o.resource_classes.map((rc, k) => ({rc, k}));
  reconcile(box, blocks, (b) => b.rc, (b) => el("div", {class: "heat", "data-class": b.rc},
    el("h3", null, label(b.rc)), el("div", {class: "zones"})), (block, {rc, k}) => {
    const zones = [];
    for (const h of o.utilization) {
      if (!zones.length || zones[zones.length - 1].zone !== h.zone) zones.push({zone: h.zone, hosts: []});
      zones[zones.length - 1].hosts.push(h);
    }
    reconcile(block.querySelector(".zones"), zones, (z) => z.zone, (z) => el("div", {class: "heat-zone"},
      el("span", {class: "zone-label"}, z.zone), el("div", {class: "cells"})), (row, z) => {
      attr(row.querySelector(".zone-label"), "title", z.zone);
      reconcile(row.querySelector(".cells"), z.hosts, (h) => `${h.host}\u0000${h.nodename}`,
        (h) => el("span", {class: "cell", "data-host": h.host, "data-nodename": h.nodename}),
        (cell, h) => {
          const f = h.usage[k];
          const name = nodeName(h.host, h.nodename);
          let cls = "cell";
          let tip = `${name} (${h.zone}, ${h.state}): `;
          if (f === null || f === undefined) {
            cls += " cell-none";
            tip += `no ${label(rc)}`;
          } else {
            tip += `${percent(f)} of ${label(rc)}`;
            if (f > 1) cls += " over";
          }
          if (h.state !== "up") cls += ` cell-${h.state}`;
          if (state.node === `${h.host}/${h.nodename}`) cls += " selected";
          for (const c of ["hit", "dim"]) if (cell.classList.contains(c)) cls += ` ${c}`;
          attr(cell, "class", cls);
          // Through the CSSOM: the page's CSP refuses style attributes written as markup.
          const colour = f === null || f === undefined ? "" : heatColour(f);
          if (cell.dataset.colour !== colour) {
            cell.style.background = colour;
            cell.dataset.colour = colour;
          }
          attr(cell, "title", tip);
          attr(cell, "data-node", name);
          attr(cell, "data-zone", h.zone);
          attr(cell, "data-usage", f ?? "");
        });
    });
  });
}

function renderDecisions(o) {
  if (state.held.has("decisions")) return;
  rows(document.querySelector("#decisions tbody"), o.decisions, (d) => `${d.at}|${d.request_id}`, 5, (d) => {
    const first = d.placements[0];
    const cands = el("div", {class: "cands"}, ...(first ? first.candidates.map((c) =>
      el("span", {class: c.host === first.host && c.nodename === first.nodename ? "cand chosen" : "cand"},
        nodeLink(c.host, c.nodename), " ", el("small", null, c.weight === null ? "–" : c.weight.toFixed(3)))) : []));
    cands.dataset.sig = JSON.stringify(first ? first.candidates : []);
    const claimed = el("span", null, ...d.placements.flatMap((p, i) => [i ? ", " : "", nodeLink(p.host, p.nodename)]),
      d.instances > d.placements.length ? ` +${d.instances - d.placements.length}` : "");
    claimed.dataset.sig = JSON.stringify(d.placements.map((p) => [p.host, p.nodename]));
    return [[time(d.at)], [d.request_id ?? "–", "mono"], [d.instances, "num"], [claimed, "claimed"], [cands, "cands"]];
  }, "no decisions yet (this process)");
}

function renderRefusals(o) {
  if (state.held.has("refusals")) return;
  rows(document.querySelector("#refusals tbody"), o.refusals, (r) => `${r.at}|${r.request_id}`, 4, (r) => [
    [time(r.at)], [r.request_id ?? "–", "mono"], [r.reason || "–", "reason"], [r.message, "message"]],
  "none (this process)");
}

function renderAllocations(o) {
  rows(document.querySelector("#allocations tbody"), o.recent_allocations, (a) => a.consumer_uuid, 5, (a) => [
    [time(a.created_at)], [a.consumer_uuid, "mono"], [nodeLink(a.host, a.nodename)], [resources(a.resources)],
    [a.project_id ?? "–"]], "no allocations");
}

function sparkline(values, {max = 1, kind = "line"} = {}) {
  // An inline SVG of the last hour: one point or bar per minute.
  const width = 240;
  const height = 36;
  const step = width / Math.max(1, values.length - 1);
  const y = (v) => height - 2 - (Math.min(v, max) / (max || 1)) * (height - 4);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "spark");
  if (kind === "bars") {
    values.forEach((v, i) => {
      if (!v) return;
      const r = document.createElementNS(ns, "rect");
      r.setAttribute("x", String(i * step - 1));
      r.setAttribute("width", "2.5");
      r.setAttribute("y", String(y(v)));
      r.setAttribute("height", String(height - 2 - y(v)));
      svg.append(r);
    });
  } else {
    const points = values.map((v, i) => (v === null ? null : `${(i * step).toFixed(1)},${y(v).toFixed(1)}`));
    const path = document.createElementNS(ns, "polyline");
    path.setAttribute("points", points.filter(Boolean).join(" "));
    svg.append(path);
    const last = points.filter(Boolean).pop();
    if (last) {  // the latest sample as a dot: a line of one point draws nothing
      const [cx, cy] = last.split(",");
      const dot = document.createElementNS(ns, "circle");
      dot.setAttribute("cx", cx);
      dot.setAttribute("cy", cy);
      dot.setAttribute("r", "2.5");
      svg.append(dot);
    }
  }
  return svg;
}

function renderTrends(o) {
  const trend = o.trend || [];
  const placed = trend.map((p) => p.placed);
  const refused = trend.map((p) => p.refused);
  const items = [
    {key: "placed", title: "instances placed (per minute; the hour's total)", values: placed,
     opts: {kind: "bars", max: Math.max(1, ...placed)}, now: number(placed.reduce((a, b) => a + b, 0))},
    {key: "refused", title: "NoValidHost (per minute; the hour's total)", values: refused,
     opts: {kind: "bars", max: Math.max(1, ...refused)}, now: number(refused.reduce((a, b) => a + b, 0))},
    ...o.resource_classes.slice(0, 4).map((rc) => {
      const values = trend.map((p) => (rc in p.utilization ? p.utilization[rc] : null));
      const last = values.filter((v) => v !== null).pop();
      return {key: rc, title: `${label(rc)} in use`, values, opts: {max: 1}, now: last === undefined ? "–" : percent(last)};
    }),
  ];
  reconcile(document.getElementById("trends"), items, (t) => t.key, (t) => el("div", {class: "trend", "data-trend": t.key},
    el("div", {class: "trend-title"}), el("div", {class: "trend-now"}), el("div", {class: "trend-plot"})), (node, t) => {
    text(node.querySelector(".trend-title"), t.title);
    text(node.querySelector(".trend-now"), t.now);
    const sig = JSON.stringify(t.values);
    const plot = node.querySelector(".trend-plot");
    if (plot.dataset.sig !== sig) {
      plot.replaceChildren(sparkline(t.values, t.opts));
      plot.dataset.sig = sig;
    }
  });
}

function render(o) {
  state.last = o;
  renderSummary(o);
  renderZones(o);
  renderClasses(o);
  renderHeatmap(o);
  renderTrends(o);
  renderDecisions(o);
  renderRefusals(o);
  renderAllocations(o);
  applySearch();
  setText("footer", `revision ${o.revision} · process ${o.pid} (decisions, NoValidHost answers and trends are this ` +
    "process's own) · refreshed every 2 s");
}

// ----------------------------------------------------------------------------------------- a node's page

async function openNode(host, nodename) {
  state.node = `${host}/${nodename}`;
  for (const cell of document.querySelectorAll(".cell.selected")) cell.classList.remove("selected");
  for (const cell of document.querySelectorAll(".cell")) {
    if (cell.dataset.host === host && cell.dataset.nodename === nodename) cell.classList.add("selected");
  }
  const panel = document.getElementById("node-panel");
  panel.hidden = false;
  setText("node-title", nodeName(host, nodename));
  const body = document.getElementById("node-body");
  body.replaceChildren(el("p", {class: "note"}, "loading…"));
  const answer = await call(`v1/hosts/${encodeURIComponent(host)}?node=${encodeURIComponent(nodename)}`);
  if (!answer.ok) {
    body.replaceChildren(el("p", {class: "empty"}, `the service answered ${answer.status}`));
    return;
  }
  const h = await answer.json();
  const inventory = el("table", {class: "inv"}, el("thead", null, el("tr", null, el("th", null, "class"),
    el("th", {class: "num"}, "used"), el("th", {class: "num"}, "capacity"), el("th", {class: "num"}, "free"))),
  el("tbody", null, ...Object.entries(h.inventories || {}).map(([rc, inv]) => el("tr", null,
    el("td", null, label(rc)), el("td", {class: "num"}, amount(rc, inv.reported_used + inv.in_flight)),
    el("td", {class: "num"}, amount(rc, inv.capacity)), el("td", {class: "num"}, amount(rc, inv.free))))));
  const consumers = h.allocations || [];
  const allocations = el("ul", {class: "consumers"});
  for (const consumer of consumers.slice(0, 20)) {
    const item = el("li", {class: "mono"}, consumer);
    allocations.append(item);
    call(`v1/allocations/${encodeURIComponent(consumer)}`).then(async (r) => {
      if (r.ok) {
        const a = await r.json();
        item.append(" ", el("span", {class: "res"}, resources(a.resources)), a.project_id ? ` · ${a.project_id}` : "");
      }
    });
  }
  const decided = (state.last ? state.last.decisions : []).filter((d) =>
    d.placements.some((p) => p.host === host && p.nodename === nodename));
  body.replaceChildren(
    el("dl", null,
      el("dt", null, "state"), el("dd", null, h.up ? (h.disabled ? "disabled" : "up") : "down",
        h.disabled_reason ? ` (${h.disabled_reason})` : ""),
      el("dt", null, "zone"), el("dd", null, h.availability_zone ?? "–"),
      el("dt", null, "aggregates"), el("dd", null, (h.aggregates || []).join(", ") || "–"),
      el("dt", null, "last report"), el("dd", null, h.last_report_seconds_ago === null ||
        h.last_report_seconds_ago === undefined ? "–" : `${number(h.last_report_seconds_ago)} s ago`),
      el("dt", null, "traits"), el("dd", null, (h.traits || []).join(", ") || "–")),
    inventory,
    el("h3", null, `allocations (${number(consumers.length)}${consumers.length > 20 ? ", the first 20" : ""})`),
    consumers.length ? allocations : el("p", {class: "empty"}, "none"),
    el("h3", null, "recent decisions here (this process)"),
    decided.length ? el("ul", null, ...decided.map((d) => el("li", null, `${time(d.at)} `,
      el("span", {class: "mono"}, d.request_id ?? "–"), ` · ${d.instances} instance(s)`)))
      : el("p", {class: "empty"}, "none of the last 20"));
}

function closeNode() {
  state.node = null;
  document.getElementById("node-panel").hidden = true;
  for (const cell of document.querySelectorAll(".cell.selected")) cell.classList.remove("selected");
}

// ------------------------------------------------------------------------------------------- capacity

async function askCapacity(event) {
  event.preventDefault();
  const form = event.target;
  const value = (name) => Number(form.elements[name].value);
  const spec = {flavor: {name: "live view", vcpus: value("vcpus"), memory_mb: value("memory_mb"),
    root_gb: value("root_gb")}};
  const zone = form.elements.az.value.trim();
  if (zone) spec.availability_zone = zone;
  const out = document.getElementById("capacity-answer");
  const answer = await call("v1/capacity", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({requests: [spec], limit: 5})});
  const body = await answer.json();
  if (!answer.ok) {
    out.replaceChildren(el("p", {class: "empty"}, body.detail || `the service answered ${answer.status}`));
    return;
  }
  const [room] = body.requests;
  out.replaceChildren(
    el("p", {class: "capacity-count"}, `${number(room.instances)} more fit on ${number(room.nodes)} nodes`),
    el("p", {class: "note"}, Object.entries(room.by_zone).map(([z, n]) => `${z} ${number(n)}`).join(" · ") || "–"),
    el("ul", null, ...room.top.map((r) => el("li", null, nodeLink(r.host, r.nodename), ` ${number(r.instances)}`))));
}

// ------------------------------------------------------------------------------------------ volume pools

async function renderVolumes() {
  const section = document.getElementById("volumes");
  const volume = state.namespaces.filter(([, info]) => info.kind === "volume");
  section.hidden = !volume.length;
  const box = document.getElementById("volume-pools");
  const groups = [];
  for (const [name] of volume) {
    const answer = await call(`v1/namespaces/${encodeURIComponent(name)}/hosts`);
    if (answer.ok) groups.push({name, pools: (await answer.json()).pools});
  }
  reconcile(box, groups, (g) => g.name, (g) => el("div", {class: "volume-ns"}, el("h3"),
    el("table", null, el("thead", null, el("tr", null, el("th", null, "pool"), el("th", {class: "num"}, "total"),
      el("th", {class: "num"}, "free"), el("th", null, "used"))), el("tbody"))), (node, g) => {
    text(node.querySelector("h3"), `namespace ${g.name}`);
    rows(node.querySelector("tbody"), g.pools, (p) => `${p.host}#${p.pool}`, 4, (p) => {
      const total = Number(p.state.total_capacity_gb) || 0;
      const free = Number(p.state.free_capacity_gb) || 0;
      return [[`${p.host}#${p.pool}`, "mono"], [Number.isFinite(total) && total ? amount("DISK_GB", total) : "–", "num"],
        [amount("DISK_GB", free), "num"], [bar([[total ? 1 - free / total : 0, "used"]])]];
    }, "no pools have reported");
  });
}

// ------------------------------------------------------------------------------------------------- poll

function status(kind, message) {
  const node = document.getElementById("status");
  node.dataset.state = kind;
  text(node, message);
}

let timer = null;

async function poll() {
  clearTimeout(timer);
  if (state.paused) return;
  try {
    const response = await call("v1/overview");
    if (response.status === 401) {
      status("auth", "a token is needed");
      showTokenForm(token() ? "That token was refused; another:" : "This service needs a bearer token:");
    } else if (!response.ok) {
      status("error", `the service answered ${response.status}`);
    } else {
      const overview = await response.json();
      if (!state.paused) {
        render(overview);
        document.getElementById("token-form").hidden = true;
        status("live", `live · ${time(overview.at)}`);
        document.body.dataset.loaded = "true";
        document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      }
      const health = await call("health");
      if (health.ok) {
        state.namespaces = Object.entries((await health.json()).namespaces || {});
        renderVolumes();
      }
    }
  } catch (error) {
    status("error", `unreachable (${error.message}); retrying`);
  }
  if (!state.paused) timer = setTimeout(poll, POLL_MS);
}

function setPaused(paused) {
  state.paused = paused;
  const button = document.getElementById("pause");
  text(button, paused ? "resume" : "pause");
  attr(button, "aria-pressed", paused ? "true" : "false");
  if (paused) {
    clearTimeout(timer);
    status("paused", "paused · press p or resume");
  } else {
    poll();
  }
}

function start() {
  takeTokenFromFragment();
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = document.getElementById("token-input").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
    poll();
  });
  document.getElementById("token-button").addEventListener("click", () => showTokenForm());
  document.getElementById("pause").addEventListener("click", () => setPaused(!state.paused));
  const search = document.getElementById("search");
  search.addEventListener("input", () => {
    state.query = search.value.trim().toLowerCase();
    applySearch();
  });
  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement) {
      if (event.key === "Escape" && event.target === search) {
        search.value = "";
        state.query = "";
        applySearch();
      }
      return;
    }
    if (event.key === "p") setPaused(!state.paused);
    if (event.key === "Escape") closeNode();
    if (event.key === "/") {
      event.preventDefault();
      search.focus();
    }
  });
  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target.closest("[data-host], [data-zone]") : null;
    if (!target) return;
    if (target.dataset.host) openNode(target.dataset.host, target.dataset.nodename || target.dataset.host);
    else if (target.classList.contains("zone-link")) {
      search.value = target.dataset.zone;
      state.query = target.dataset.zone.toLowerCase();
      applySearch();
    }
  });
  document.getElementById("node-close").addEventListener("click", closeNode);
  document.getElementById("capacity-form").addEventListener("submit", askCapacity);
  // A list under the pointer is held still, so that a row can be read (and copied) while decisions pour in.
  for (const id of ["decisions", "refusals"]) {
    const panel = document.getElementById(id).closest("section");
    panel.addEventListener("mouseenter", () => {
      state.held.add(id);
      panel.classList.add("held");
    });
    panel.addEventListener("mouseleave", () => {
      state.held.delete(id);
      panel.classList.remove("held");
      if (state.last && !state.paused) render(state.last);
    });
  }
  window.addEventListener("hashchange", () => {
    takeTokenFromFragment();
    poll();
  });
  poll();
}

start();
