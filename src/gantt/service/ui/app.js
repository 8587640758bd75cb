// Gantt's live view: polls GET /v1/overview every POLL_MS and redraws. Plain DOM, no framework, nothing
// fetched from anywhere but this service. Every value from the service goes in as text, never as markup.
"use strict";

const POLL_MS = 2000;
const TOKEN_KEY = "gantt-token";

// ------------------------------------------------------------------------------------------------ token

function takeTokenFromFragment() {
  // /ui#token=… : kept for this tab (sessionStorage), then dropped from the address bar and the history.
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

function fill(tbody, rows, empty, columns) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {class: "empty"}, el("td", {colspan: columns}, empty))]));
}

function setText(id, value) {
  document.getElementById(id).textContent = value;
}

function number(value) {
  if (value === null || value === undefined) return "–";
  const rounded = Math.abs(value) >= 100 || Number.isInteger(value) ? Math.round(value) : Math.round(value * 10) / 10;
  return rounded.toLocaleString("en-US");
}

function percent(fraction) {
  return `${Math.round(fraction * 1000) / 10}%`;
}

function time(iso) {
  if (!iso) return "–";
  const at = new Date(iso);
  return at.toLocaleTimeString("en-GB", {hour12: false});
}

function nodeName(host, nodename) {
  return host === nodename ? host : `${host}/${nodename}`;
}

function heatColour(fraction) {
  // 0 → green, 0.5 → amber, 1 → red; over capacity → deep red.
  if (fraction > 1) return "hsl(350, 80%, 32%)";
  const f = Math.max(0, Math.min(1, fraction));
  return `hsl(${Math.round(130 * (1 - f))}, 65%, ${Math.round(48 - 6 * f)}%)`;
}

function bar(parts) {
  // parts: [[fraction, class], …]
  return el("div", {class: "bar"}, ...parts.map(([f, cls]) =>
    el("span", {class: cls, style: `width:${Math.max(0, Math.min(1, f)) * 100}%`})));
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
  const rows = o.zones.map((z) => {
    const total = z.up + z.disabled + z.down || 1;
    return el("tr", {"data-zone": z.zone},
      el("td", null, z.zone), el("td", {class: "num up"}, number(z.up)),
      el("td", {class: "num disabled"}, number(z.disabled)), el("td", {class: "num down"}, number(z.down)),
      el("td", null, bar([[z.up / total, "up"], [z.disabled / total, "disabled"], [z.down / total, "down"]])));
  });
  fill(document.querySelector("#zones tbody"), rows, "no nodes have reported yet", 5);
}

function renderClasses(o) {
  const rows = o.classes.map((c) => {
    const share = c.capacity > 0 ? c.used / c.capacity : 0;
    return el("tr", {"data-class": c.resource_class},
      el("td", null, c.resource_class), el("td", {class: "num"}, number(c.used)),
      el("td", {class: "num"}, number(c.capacity)),
      el("td", null, el("div", {class: "share"}, bar([[share, "used"]]), el("span", null, percent(share)))));
  });
  fill(document.querySelector("#classes tbody"), rows, "no inventories yet", 4);
}

function renderHeatmap(o) {
  const box = document.getElementById("heatmap");
  const legend = document.getElementById("heat-legend");
  legend.replaceChildren(
    el("span", {class: "swatch", style: `background:${heatColour(0)}`}), "0%",
    el("span", {class: "swatch", style: `background:${heatColour(0.5)}`}), "50%",
    el("span", {class: "swatch", style: `background:${heatColour(1)}`}), "100%",
    el("span", {class: "swatch cell-down"}), "down",
    el("span", {class: "swatch cell-disabled"}), "disabled");
  const shown = o.utilization.length;
  setText("heat-note", o.utilization_omitted
    ? `The ${number(shown)} most used of ${number(o.hosts)} nodes (${number(o.utilization_omitted)} not shown).`
    : `${number(shown)} node${shown === 1 ? "" : "s"}, by zone and name. Hover a cell for its node.`);
  if (!shown) {
    box.replaceChildren(el("p", {class: "empty"}, "no nodes yet"));
    return;
  }
  const blocks = o.resource_classes.map((rc, k) => {
    const zones = [];
    let current = null;
    for (const h of o.utilization) {
      if (!current || current.zone !== h.zone) {
        current = {zone: h.zone, cells: []};
        zones.push(current);
      }
      const f = h.usage[k];
      const name = nodeName(h.host, h.nodename);
      let cls = "cell";
      let style = null;
      let text = `${name} (${h.zone}, ${h.state}): `;
      if (f === null || f === undefined) {
        cls += " cell-none";
        text += `no ${rc}`;
      } else {
        text += `${percent(f)} of ${rc}`;
        style = `background:${heatColour(f)}`;
      }
      if (h.state !== "up") cls += ` cell-${h.state}`;
      current.cells.push(el("span", {class: cls, style, title: text, "data-node": name, "data-usage": f ?? ""}));
    }
    return el("div", {class: "heat", "data-class": rc}, el("h3", null, rc),
      ...zones.map((z) => el("div", {class: "heat-zone"}, el("span", {class: "zone-label"}, z.zone),
        el("div", {class: "cells"}, ...z.cells))));
  });
  box.replaceChildren(...blocks);
}

function renderDecisions(o) {
  const rows = o.decisions.map((d) => {
    const first = d.placements[0];
    const candidates = first ? first.candidates.map((c) =>
      el("span", {class: c.host === first.host && c.nodename === first.nodename ? "cand chosen" : "cand"},
        nodeName(c.host, c.nodename), " ", el("small", null, c.weight === null ? "–" : c.weight.toFixed(3)))) : [];
    const claimed = d.placements.map((p) => nodeName(p.host, p.nodename)).join(", ") +
      (d.instances > d.placements.length ? ` +${d.instances - d.placements.length}` : "");
    return el("tr", null, el("td", null, time(d.at)), el("td", {class: "mono"}, d.request_id ?? "–"),
      el("td", {class: "num"}, d.instances), el("td", {class: "claimed"}, claimed),
      el("td", {class: "cands"}, ...candidates));
  });
  fill(document.querySelector("#decisions tbody"), rows, "no decisions yet (this process)", 5);
}

function renderRefusals(o) {
  const rows = o.refusals.map((r) => el("tr", null, el("td", null, time(r.at)),
    el("td", {class: "mono"}, r.request_id ?? "–"), el("td", {class: "reason"}, r.reason || "–"),
    el("td", {class: "message"}, r.message)));
  fill(document.querySelector("#refusals tbody"), rows, "none (this process)", 4);
}

function renderAllocations(o) {
  const rows = o.recent_allocations.map((a) => el("tr", null, el("td", null, time(a.created_at)),
    el("td", {class: "mono"}, a.consumer_uuid), el("td", null, nodeName(a.host, a.nodename)),
    el("td", null, Object.entries(a.resources).map(([rc, n]) => `${rc} ${number(n)}`).join(", ")),
    el("td", null, a.project_id ?? "–")));
  fill(document.querySelector("#allocations tbody"), rows, "no allocations", 5);
}

function render(o) {
  renderSummary(o);
  renderZones(o);
  renderClasses(o);
  renderHeatmap(o);
  renderDecisions(o);
  renderRefusals(o);
  renderAllocations(o);
  setText("footer", `revision ${o.revision} · process ${o.pid} (decisions and NoValidHost answers are this ` +
    "process's own) · refreshed every 2 s");
}

// ------------------------------------------------------------------------------------------------- poll

function status(state, text) {
  const node = document.getElementById("status");
  node.dataset.state = state;
  node.textContent = text;
}

let timer = null;

async function poll() {
  clearTimeout(timer);
  const headers = {Accept: "application/json"};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  try {
    const response = await fetch("/v1/overview", {headers, cache: "no-store"});
    if (response.status === 401) {
      status("auth", "a token is needed");
      showTokenForm(token() ? "That token was refused; another:" : "This service needs a bearer token:");
    } else if (!response.ok) {
      status("error", `the service answered ${response.status}`);
    } else {
      const overview = await response.json();
      render(overview);
      document.getElementById("token-form").hidden = true;
      status("live", `live · ${time(overview.at)}`);
      document.body.dataset.loaded = "true";
    }
  } catch (error) {
    status("error", `unreachable (${error.message}); retrying`);
  }
  timer = setTimeout(poll, POLL_MS);
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
  window.addEventListener("hashchange", () => {
    takeTokenFromFragment();
    poll();
  });
  poll();
}

start();
