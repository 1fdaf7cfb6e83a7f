// duetime dashboard: a small single-page app that reads and acts only through the REST API
// (/api/v1), with the API key its user enters (kept in this browser's localStorage).
// No framework: hash routes, DOM built with h(), charts drawn as SVG. Every page refreshes its
// data every REFRESH_MS while the tab is visible (no reload, paused while the user types).

import {
  durationSeconds, localInputFromUtc, splitPartial, timelineSeries, utcFromLocalInput,
} from "/dashboard/chart.js";
import { auditPage } from "/dashboard/audit.js";
import { s } from "/dashboard/svg.js";
import { workflowInstancePage, workflowsPage } from "/dashboard/workflows.js";

const API = "/api/v1";
const KEY = "duetime.key";
const TENANT = "duetime.tenant";
const PAGE = 50;
const REFRESH_MS = 5000;
let me = null; // {tenant, role, auth_required}
let refreshTimer = null;
let rendering = false;
let refreshing = false; // a live update (not a navigation): pages leave the focus alone
let config = { auth_required: false };

// --- helpers ---------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function fmtInstant(iso) {
  if (!iso) return "—";
  return iso.replace(/\.\d+/, "").replace("+00:00", "Z");
}
function fmtLocal(iso) {
  return iso ? iso.replace(/\.\d+/, "") : "—";
}
function fmtSeconds(v) {
  if (v === null || v === undefined) return "—";
  if (v < 1) return `${Math.round(v * 1000)} ms`;
  if (v < 120) return `${v.toFixed(1)} s`;
  if (v < 7200) return `${(v / 60).toFixed(1)} min`;
  return `${(v / 3600).toFixed(1)} h`;
}
function state(value) {
  return h("span", { class: `state ${value}` }, value);
}
function fill(view, ...kids) {
  view.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}
function canWrite() {
  return me && ["operator", "admin", "superadmin"].includes(me.role);
}
function say(text, error = false) {
  const box = document.getElementById("status");
  box.replaceChildren(h("div", { class: error ? "msg error" : "msg" }, text));
  if (!error) setTimeout(() => { if (box.textContent === text) box.replaceChildren(); }, 4000);
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = localStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let url = API + path;
  const tenant = localStorage.getItem(TENANT);
  if (tenant && me && me.role === "superadmin" && !path.startsWith("/whoami")) {
    url += (url.includes("?") ? "&" : "?") + "tenant=" + encodeURIComponent(tenant);
  }
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 429 && attempt < 3) {
      const wait = Number(response.headers.get("Retry-After") || "1");
      await new Promise((r) => setTimeout(r, wait * 1000));
      continue;
    }
    if (response.status === 204) return null;
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : "";
}

function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = raw.split("?");
  return { parts: path.split("/").filter(Boolean), params: new URLSearchParams(qs || "") };
}

function go(path, params) {
  location.hash = "#" + path + (params ? query(params) : "");
}

// --- who am I ----------------------------------------------------------------------------------

// The API-key box only where the server asks for keys; open mode (``duetime up`` on loopback)
// has none to ask for. A superadmin (open mode's caller too) keeps the tenant box either way.
function showKeyBox() {
  const open = !config.auth_required;
  for (const el of document.querySelectorAll(".key-only")) el.hidden = open;
  const superadmin = me && me.role === "superadmin";
  for (const el of document.querySelectorAll(".superadmin-only")) el.hidden = !superadmin;
  const admin = me && ["admin", "superadmin"].includes(me.role);
  for (const el of document.querySelectorAll(".admin-only")) el.hidden = !admin;
  document.getElementById("key-use").hidden = open && !superadmin;
}

async function identify() {
  const who = document.getElementById("whoami");
  const key = localStorage.getItem(KEY);
  if (config.auth_required && !key) {
    me = null;
    who.textContent = "enter an API key";
    return false;
  }
  try {
    me = await api("GET", "/whoami");
    who.textContent = `${me.tenant} · ${me.role}${me.key_name ? " · " + me.key_name : ""}`;
    showKeyBox();
    document.getElementById("tenant-input").value = localStorage.getItem(TENANT) || "";
    return true;
  } catch (err) {
    me = null;
    who.textContent = "";
    say(`The API key was refused: ${err.message}`, true);
    return false;
  }
}

// --- charts ------------------------------------------------------------------------------------

const COLORS = ["#2457c5", "#c0262d", "#18794e", "#a35200", "#7b3fb8"];

function lineChart(title, series, { unit = "", label } = {}) {
  const W = 460, H = 170, L = 44, R = 8, T = 8, B = 22;
  const pts = series.flatMap((x) => [...x.points, ...(x.partial ? [x.partial] : [])].filter((p) => p.v !== null));
  const times = series.flatMap((x) => [...x.points, ...(x.partial ? [x.partial] : [])].map((p) => p.t));
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1);
  const vmax = Math.max(unit === "s" ? 1e-3 : 1, ...pts.map((p) => p.v));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / vmax) * (H - T - B);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label || title });
  svg.append(s("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.append(s("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const frac of [0, 0.5, 1]) {
    const v = vmax * frac;
    const text = unit === "s" ? fmtSeconds(v) : (v >= 10 ? Math.round(v) : v.toFixed(1));
    svg.append(s("text", { class: "tick", x: L - 4, y: y(v) + 3, "text-anchor": "end" }, text));
  }
  if (times.length) {
    for (const t of [t0, t1]) {
      const d = new Date(t);
      svg.append(s("text", { class: "tick", x: x(t), y: H - 6, "text-anchor": t === t0 ? "start" : "end" },
        d.toISOString().slice(11, 16) + "Z"));
    }
  }
  series.forEach((serie, i) => {
    const color = serie.color || COLORS[i % COLORS.length];
    let d = "";
    let pen = false;
    for (const p of serie.points) {
      if (p.v === null) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`;
      pen = true;
    }
    if (d) svg.append(s("path", { d, fill: "none", stroke: color, "stroke-width": 2 }, s("title", {}, serie.name)));
    // the bucket still filling, projected to a whole one: dashed, never a drop to its count
    const p = serie.partial;
    const before = serie.points.filter((q) => q.v !== null).at(-1);
    if (p) {
      const from = before ? `M${x(before.t).toFixed(1)},${y(before.v).toFixed(1)}L` : "M";
      svg.append(s("path", { class: "partial", d: `${from}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`,
        fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": "4 3" },
        s("title", {}, `${serie.name}: this interval so far, projected`)));
      svg.append(s("circle", { class: "partial", cx: x(p.t).toFixed(1), cy: y(p.v).toFixed(1), r: 2.5, fill: color }));
    }
  });
  const legend = h("div", { class: "legend" },
    series.map((serie, i) => {
      const span = h("span", {}, serie.name);
      span.style.setProperty("--c", serie.color || COLORS[i % COLORS.length]);
      return span;
    }));
  const empty = pts.length === 0 ? h("div", { class: "muted" }, "no data in this window yet") : null;
  return h("section", { class: "chart" }, h("h3", {}, title), svg, legend, empty);
}

// --- pages -------------------------------------------------------------------------------------

function card(label, value, bad = false) {
  return h("div", { class: bad ? "card bad" : "card" }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value));
}

function table(headers, rows, empty = "nothing to show") {
  if (!rows.length) return h("div", { class: "empty" }, empty);
  // a wide table scrolls inside its own box: the page itself never scrolls sideways
  return h("div", { class: "table-wrap" }, h("table", {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows)));
}

async function overview(view) {
  const admin = me && (me.role === "admin" || me.role === "superadmin");
  const [ov, tl, br] = await Promise.all([
    api("GET", "/stats/overview"),
    api("GET", "/stats/timeline?window=3600&step=60"),
    admin ? api("GET", "/breakers").catch(() => null) : null,  // installation-wide: admins
  ]);
  const q = ov.queue;
  const buckets = tl.buckets.map((b) => ({ ...b, t: Date.parse(b.start) }));
  const split = splitPartial(buckets, tl.step, Date.parse(ov.now));
  const line = (name, pick, color) => ({ name, color, ...timelineSeries(split, pick) });
  const lastHourOk = buckets.reduce((n, b) => n + b.succeeded, 0);
  const failures = buckets.reduce((n, b) => n + b.failed_attempts + b.lost_attempts + b.dead, 0);
  const leader = ov.cluster.leader;
  fill(view, 
    h("h1", {}, `Overview — tenant ${ov.tenant}`),
    h("div", { class: "cards" },
      card("due now", q.due, q.due > 0 && q.oldest_due_age > 60),
      card("oldest due", fmtSeconds(q.oldest_due_age), q.oldest_due_age > 60),
      card("running", q.running),
      card("dead letters", q.dead_letters, q.dead_letters > 0),
      card("succeeded (1 h)", lastHourOk),
      card("failures (1 h)", failures, failures > 0),
      card("workers live", ov.cluster.workers.length, ov.cluster.workers.length === 0),
      card("nodes live", ov.cluster.nodes.length),
      card("leader", leader ? `term ${leader.term}` : "none", !leader),
      card("alerts firing", ov.alerts_firing.length, ov.alerts_firing.length > 0),
    ),
    h("div", { class: "charts" },
      lineChart("Throughput (runs succeeded per minute)", [
        line("succeeded", (b) => b.succeeded),
      ]),
      lineChart("Fire lag (start − scheduled)", [  // percentiles: never projected
        { name: "p50", points: buckets.map((b) => ({ t: b.t, v: b.fire_lag_p50 })) },
        { name: "p95", points: buckets.map((b) => ({ t: b.t, v: b.fire_lag_p95 })), color: "#a35200" },
        { name: "p99", points: buckets.map((b) => ({ t: b.t, v: b.fire_lag_p99 })), color: "#c0262d" },
      ], { unit: "s" }),
      lineChart("Queue depth (sampled by the leader every 10 s)", [
        { name: "due", points: ov.depth.map((d) => ({ t: Date.parse(d.at), v: d.due })) },
        { name: "running", points: ov.depth.map((d) => ({ t: Date.parse(d.at), v: d.running })), color: "#18794e" },
      ]),
      lineChart("Failures per minute", [
        line("attempts failed", (b) => b.failed_attempts, "#a35200"),
        line("leases lost", (b) => b.lost_attempts, "#7b3fb8"),
        line("runs dead", (b) => b.dead, "#c0262d"),
      ]),
    ),
    h("h2", {}, "Alerts firing"),
    table(["kind", "summary", "since"], ov.alerts_firing.map((a) => h("tr", {},
      h("td", {}, state(a.kind)), h("td", {}, a.summary), h("td", {}, fmtInstant(a.opened_at)))),
      "no alert is firing"),
    h("h2", {}, "Leader"),
    h("p", {}, leader ? `${leader.node_id}, term ${leader.term}, lease until ${fmtInstant(leader.expires_at)}` : "no leader"),
    h("h2", {}, "Nodes"),
    table(["node", "roles", "partitions", "heartbeat"], ov.cluster.nodes.map((n) => h("tr", {},
      h("td", {}, n.id), h("td", {}, n.roles.join(", ")), h("td", {}, n.partitions || "all"),
      h("td", {}, fmtInstant(n.heartbeat_at))))),
    h("h2", {}, "Workers"),
    table(["worker", "tasks", "heartbeat"], ov.cluster.workers.map((w) => h("tr", {},
      h("td", {}, w.id), h("td", {}, w.tasks.join(", ")), h("td", {}, fmtInstant(w.heartbeat_at)))),
      "no live worker"),
    ...(br ? [
      h("h2", {}, "Circuit breakers"),
      table(["target", "state", "failures", "opened", "retry at", "worker"], br.breakers.map((b) => h("tr", {},
        h("td", {}, b.key), h("td", {}, state(b.state)), h("td", {}, String(b.failures)),
        h("td", {}, fmtInstant(b.opened_at)), h("td", {}, fmtInstant(b.retry_at)), h("td", {}, b.worker_id))),
        "no breaker is open: every target host and command answers"),
    ] : []),
  );
}

function describeSchedule(s) {
  if (s.kind === "cron") return `cron ${s.cron} (${s.tz})`;
  if (s.kind === "every" && s.every_calendar) return `every ${s.every_calendar} (${s.tz})`;
  if (s.kind === "every") return `every ${fmtSeconds(s.every_seconds)}`;
  if (s.kind === "at") return `at ${fmtInstant(s.at)}`;
  return "now";
}

async function jobs(view, params) {
  const search = params.get("q") || "";
  const status = params.get("status") || "";
  const tag = params.get("tag") || "";
  const cursor = params.get("cursor") || "";
  const back = params.get("back") || "";
  const page = await api("GET", "/jobs" + query({
    name_prefix: search, status, tag, cursor, limit: PAGE,
  }));
  const input = h("input", { id: "job-search", type: "search", placeholder: "name starts with…",
    value: search, "aria-label": "Search jobs by name prefix" });
  const statusSelect = h("select", { id: "job-status", "aria-label": "Filter by status" },
    ["", "active", "paused", "cancelled", "completed"].map((v) =>
      h("option", { value: v, selected: v === status }, v || "any status")));
  const tagInput = h("input", { id: "job-tag", placeholder: "tag", value: tag, "aria-label": "Filter by tag" });
  const form = h("form", { class: "toolbar", role: "search", onsubmit: (e) => {
    e.preventDefault();
    go("/jobs", { q: input.value.trim(), status: statusSelect.value, tag: tagInput.value.trim() });
  } }, input, statusSelect, tagInput, h("button", { type: "submit" }, "Search"));
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => form.requestSubmit(), 300);
  });
  statusSelect.addEventListener("change", () => form.requestSubmit());
  const rows = page.items.map((j) => h("tr", {},
    h("td", {}, h("a", { href: `#/jobs/${j.id}` }, j.name)),
    h("td", {}, state(j.status)),
    h("td", {}, describeSchedule(j.schedule)),
    h("td", {}, fmtInstant(j.next_occurrence_at)),
    h("td", {}, j.task),
    h("td", {}, j.tags.join(", "))));
  const stack = back ? back.split(",") : [];
  const pager = h("div", { class: "pager" },
    h("button", { id: "jobs-prev", disabled: !cursor, onclick: () => {
      const prev = stack.slice(0, -1);
      go("/jobs", { q: search, status, tag, cursor: stack[stack.length - 1] || "", back: prev.join(",") });
    } }, "← Previous"),
    h("button", { id: "jobs-next", disabled: !page.next_cursor, onclick: () => {
      go("/jobs", { q: search, status, tag, cursor: page.next_cursor, back: [...stack, cursor].join(",") });
    } }, "Next →"),
    h("span", { class: "muted" }, `${page.items.length} shown`));
  fill(view, h("h1", {}, "Jobs"), form,
    table(["name", "status", "schedule", "next fire (UTC)", "task", "tags"], rows, "no job matches"), pager);
  if (!refreshing && (search || document.activeElement === document.body)) input.focus();
}

async function act(label, fn) {
  try {
    await fn();
    say(`${label}: done`);
    await render();
  } catch (err) {
    say(`${label} failed: ${err.message}`, true);
  }
}

// A job's bounds, those it has (start, end, runs left of max_runs).
// "serialize (at most 3 waiting)", "replace (stop within 30s)": the overlap options that apply
function describeOverlap(job) {
  const extra = [];
  if (job.max_waiting) extra.push(`at most ${job.max_waiting} waiting`);
  if (job.overlap === "replace") extra.push(`stop within ${job.replace_timeout}s`);
  return extra.length ? `${job.overlap} (${extra.join(", ")})` : job.overlap;
}

function boundsFields(job) {
  const out = [];
  if (job.start_at) out.push(["starts", fmtInstant(job.start_at)]);
  if (job.end_at) out.push(["ends", fmtInstant(job.end_at)]);
  if (job.max_runs !== null && job.max_runs !== undefined) out.push(["runs left", `${job.runs_left} of ${job.max_runs}`]);
  return out;
}

// The exclusion calendars a job names and what an excluded occurrence does (issue 24).
function calendarFields(job) {
  if (!job.calendars || !job.calendars.length) return [];
  const does = job.calendar_shift ? `moved: ${job.calendar_shift}` : "excluded occurrences skipped";
  return [["calendars", `${job.calendars.join(", ")} (${does})`]];
}

// A paused job's note — who, why, until when it resumes by itself — and pause on failure
// (decision 0023), those it has.
function pauseFields(job) {
  const out = [];
  const pause = job.pause;
  if (pause) {
    if (pause.by) out.push(["paused by", pause.by]);
    if (pause.note) out.push(["pause note", pause.note]);
    out.push(["paused until", pause.until ? `${fmtInstant(pause.until)} (resumes by itself)` : "resumed by hand"]);
  }
  if (job.pause_after_dead) out.push(["pause on failure", `after ${job.pause_after_dead} consecutive dead runs`]);
  return out;
}

// Pause, with an optional note and an instant it resumes by itself (datetime-local: the
// browser's zone); both empty: a plain pause, as before.
function pauseControls(id) {
  const note = h("input", { id: "job-pause-note", placeholder: "why (optional)", maxlength: "1000", "aria-label": "Pause note" });
  const until = h("input", { id: "job-pause-until", type: "datetime-local", "aria-label": "Resume by itself at" });
  const pause = () => {
    const body = {};
    if (note.value.trim()) body.note = note.value.trim();
    if (until.value) body.until = new Date(until.value).toISOString();
    return api("POST", `/jobs/${id}/pause`, Object.keys(body).length ? body : undefined);
  };
  return [h("button", { id: "job-pause", onclick: () => act("Pause", pause) }, "Pause"), note, until];
}

// Pause on failure (decision 0023): after N consecutive dead runs the job pauses itself;
// empty: never.
function pauseOnFailureControl(job) {
  const after = h("input", { id: "job-pause-after", type: "number", min: "1", max: "1000",
    value: job.pause_after_dead || "", placeholder: "never", "aria-label": "Pause after this many consecutive dead runs" });
  const set = () => api("PUT", `/jobs/${job.id}/pause-on-failure`, { after: after.value ? Number(after.value) : null });
  return [h("label", { for: "job-pause-after" }, "pause after dead runs"), after,
    h("button", { id: "job-pause-after-set", onclick: () => act("Pause on failure", set) }, "Set")];
}

// The retry window and error classification (docs/delivery.md), shown only when set.
function retryRuleFields(retry) {
  const out = [];
  if (retry.within !== null && retry.within !== undefined) out.push(["retry window", `${retry.within}s after the run's instant`]);
  const listed = (names, codes) => [...(names || []), ...(codes || []).map((c) => `HTTP ${c}`)].join(", ");
  const permanent = listed(retry.permanent_on, retry.permanent_on_status);
  const retried = listed(retry.retry_on, retry.retry_on_status);
  if (permanent) out.push(["permanent on", permanent]);
  if (retried) out.push(["retried on", retried]);
  return out;
}

// A job's lifecycle history (decision 0023): pauses with their notes, resumes, pauses on
// failure, retirements by a sync — newest first.
function historyTable(events) {
  return table(["when (UTC)", "what", "who", "note"], events.map((e) => h("tr", { "data-event": e.kind },
    h("td", {}, fmtInstant(e.at)), h("td", {}, e.kind), h("td", {}, e.actor),
    h("td", {}, [e.detail.note, e.detail.until ? `until ${fmtInstant(e.detail.until)}` : null]
      .filter(Boolean).join(" — ")))), "no pause or resume yet");
}

// Backfill (decision 0022): the job's backfilled runs by state and, for an operator, a form
// that creates the missing runs of a past range (a dry run first says what it would do).
function backfillSection(job, progress) {
  const states = Object.entries(progress ? progress.states : {});
  const out = [h("div", { class: "summary", id: "backfill-progress" }, states.length
    ? `${progress.total} backfilled runs: ${states.map(([k, n]) => `${n} ${k}`).join(", ")}`
    : "no backfilled run")];
  if (!canWrite() || job.status !== "active" || job.schedule.kind === "now" || job.schedule.kind === "at") return out;
  const from = h("input", { id: "backfill-from", type: "datetime-local", "aria-label": "Backfill from (UTC)" });
  const to = h("input", { id: "backfill-to", type: "datetime-local", "aria-label": "Backfill to (UTC)" });
  const dry = h("input", { id: "backfill-dry", type: "checkbox", checked: true, "aria-label": "Dry run" });
  const send = () => api("POST", `/jobs/${job.id}/backfill`, {
    from: utcFromLocalInput(from.value), to: utcFromLocalInput(to.value), dry_run: dry.checked,
  }).then((r) => say(`Backfill${r.dry_run ? " (dry run)" : ""}: ${r.created} ${r.dry_run ? "would be created" : "created"}, ${r.existing} existing, ${r.skipped} skipped by calendars${r.warning ? ` — ${r.warning}` : ""}`));
  out.push(h("form", { class: "toolbar", id: "backfill-form", onsubmit: (e) => {
    e.preventDefault();
    send().then(() => (dry.checked ? null : render())).catch((err) => say(`Backfill failed: ${err.message}`, true));
  } }, from, to, h("label", {}, dry, " dry run"), h("button", { type: "submit", id: "backfill-go" }, "Backfill")));
  return out;
}

async function jobDetail(view, id) {
  const [job, runs, fires, why, history, backfilled] = await Promise.all([
    api("GET", `/jobs/${id}`),
    api("GET", `/jobs/${id}/runs?limit=20`),
    api("POST", "/schedules/preview", { job_id: id, count: 10 }).catch(() => ({ items: [] })),
    api("GET", `/jobs/${id}/explain?last=10&count=5`),
    api("GET", `/jobs/${id}/history?limit=10`).catch(() => ({ items: [] })),
    api("GET", `/jobs/${id}/backfill`).catch(() => null),
  ]);
  const buttons = [];
  if (canWrite()) {
    if (job.status === "active") buttons.push(...pauseControls(id));
    if (job.status === "active" || job.status === "paused") buttons.push(...pauseOnFailureControl(job));
    if (job.status === "paused") buttons.push(h("button", { id: "job-resume", onclick: () => act("Resume", () => api("POST", `/jobs/${id}/resume`)) }, "Resume"));
    if (job.status !== "cancelled") buttons.push(h("button", { id: "job-trigger", class: "primary", onclick: () => act("Trigger", () => api("POST", `/jobs/${id}/trigger`)) }, "Trigger now"));
    if (job.status === "active" || job.status === "paused") buttons.push(h("button", { id: "job-cancel", class: "danger", onclick: () => {
      if (confirm(`Cancel job ${job.name} for good?`)) act("Cancel", () => api("POST", `/jobs/${id}/cancel`));
    } }, "Cancel job"));
  }
  const fields = [
    ["id", job.id], ["status", state(job.status)], ["schedule", describeSchedule(job.schedule)],
    ["time zone", job.schedule.tz], ["next fire", fmtInstant(job.next_occurrence_at)],
    ...boundsFields(job),
    ...calendarFields(job),
    ...pauseFields(job),
    ["task", job.target && job.target.url ? `${job.task} → ${job.target.url}` : job.task],
    // header values come redacted from the API ("<redacted>"): names only, never credentials
    ...(job.target && Object.keys(job.target.headers || {}).length
      ? [["headers", Object.entries(job.target.headers).map(([k, v]) =>
          `${k}: ${typeof v === "string" ? v : `secret ${v.secret}`}`).join(", ")]]
      : []),
    ["retry", `${job.retry.max_attempts} attempts, backoff ${job.retry.backoff_base}s ×${job.retry.backoff_factor} (cap ${job.retry.backoff_cap}s)`],
    ...retryRuleFields(job.retry),
    ["policies", `misfire ${job.misfire} (grace ${job.misfire_grace}s), overlap ${describeOverlap(job)}, ${job.delivery}`],
    ["timeout", job.timeout === null ? "none" : `${job.timeout}s`],
    ["SLA", job.sla === null || job.sla === undefined ? "none" : `${job.sla}s`],
    ["priority", job.priority], ["tags", job.tags.join(", ") || "—"],
  ];
  fill(view, 
    h("p", {}, h("a", { href: "#/jobs" }, "← Jobs")),
    h("h1", {}, `Job ${job.name}`),
    h("div", { class: "toolbar" }, buttons),
    h("dl", { class: "fields" }, fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, "Why it did or didn't run"),
    h("div", { class: "summary", id: "explain-summary" }, why.summary),
    why.notes.length ? h("ul", { class: "notes" }, why.notes.map((n) => h("li", {}, n))) : null,
    table(["scheduled (UTC)", `local (${why.tz})`, "what", "why"], why.last.map((r) => h("tr", {},
      h("td", {}, fmtInstant(r.instant) + (r.count > 1 ? ` (+${r.count - 1})` : "")),
      h("td", {}, fmtLocal(r.local)), h("td", {}, state(r.what)),
      h("td", {}, r.run_id ? h("a", { href: `#/runs/${r.run_id}` }, r.why) : r.why))), "no occurrence yet"),
    h("h2", {}, "Next fire instants"),
    table(["#", "UTC", `local (${job.schedule.tz})`, "note"], fires.items.map((o, i) => h("tr", {},
      h("td", { class: "num" }, i + 1), h("td", {}, fmtInstant(o.utc || o.instant)),
      h("td", {}, fmtLocal(o.local)),
      h("td", {}, [o.dst_note, o.calendar_note].filter(Boolean).join("; ")))), "no next fire instant"),
    h("h2", {}, "Runs"),
    runsTable(runs.items),
    h("h2", {}, "History"),
    historyTable(history.items),
    h("h2", {}, "Backfill"),
    backfillSection(job, backfilled),
  );
}

function runsTable(items) {
  const now = Date.now();
  return table(["run", "job", "task", "state", "scheduled (UTC)", "worker", "duration", "attempt", "reason / error"],
    items.map((r) => h("tr", { "data-run": r.id },
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8))),
      h("td", {}, h("a", { href: `#/jobs/${r.job_id}` }, r.job_name)),
      h("td", { class: "task" }, r.task),
      h("td", {}, state(r.state)),
      h("td", {}, fmtInstant(r.scheduled_for)),
      h("td", { class: "worker" }, r.worker || r.lease_owner || "—"),
      h("td", { class: "num duration" }, fmtSeconds(durationSeconds(r.started_at, r.finished_at, now))),
      h("td", { class: "num" }, `${r.attempt}/${r.max_attempts}`),
      h("td", {}, [r.reason, r.last_error_class, r.last_error_message].filter(Boolean).join(": ")))),
    "no run");
}

const RUN_FILTERS = ["job", "task", "state", "since", "until"];

async function runs(view, params) {
  const f = Object.fromEntries(RUN_FILTERS.map((k) => [k, params.get(k) || ""]));
  const cursor = params.get("cursor") || "";
  const back = params.get("back") || "";
  let jobId = "";
  if (f.job) {  // a job's name (or id): the API filters by id
    const found = await api("GET", "/jobs" + query({ name_prefix: f.job, limit: 100 }));
    const job = found.items.find((j) => j.name === f.job || j.id === f.job);
    jobId = job ? job.id : null;
  }
  const page = jobId === null ? { items: [], next_cursor: null } : await api("GET", "/runs" + query({
    job_id: jobId, task: f.task, state: f.state, since: f.since, until: f.until, cursor, limit: PAGE,
  }));
  const jobInput = h("input", { id: "run-job", placeholder: "job name", value: f.job, "aria-label": "Filter by job name" });
  const taskInput = h("input", { id: "run-task", placeholder: "task", value: f.task, "aria-label": "Filter by task" });
  const select = h("select", { id: "run-state", "aria-label": "Filter by state" },
    ["", "scheduled", "running", "succeeded", "dead", "cancelled", "skipped"].map((v) =>
      h("option", { value: v, selected: v === f.state }, v || "any state")));
  const since = h("input", { id: "run-since", type: "datetime-local", value: localInputFromUtc(f.since), "aria-label": "Scheduled from (UTC)" });
  const until = h("input", { id: "run-until", type: "datetime-local", value: localInputFromUtc(f.until), "aria-label": "Scheduled before (UTC)" });
  const current = () => ({
    job: jobInput.value.trim(), task: taskInput.value.trim(), state: select.value,
    since: utcFromLocalInput(since.value), until: utcFromLocalInput(until.value),
  });
  const form = h("form", { class: "toolbar", role: "search", id: "run-filters", onsubmit: (e) => {
    e.preventDefault();
    go("/runs", current());
  } },
  jobInput, taskInput, select,
  h("label", {}, "from ", since), h("label", {}, "to ", until), h("span", { class: "muted" }, "UTC"),
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", id: "run-clear", onclick: () => go("/runs") }, "Clear"));
  select.addEventListener("change", () => form.requestSubmit());
  const stack = back ? back.split(",") : [];
  fill(view, h("h1", {}, "Runs"), form,
    jobId === null ? h("div", { class: "empty" }, `no job named ${f.job}`) : runsTable(page.items),
    h("div", { class: "pager" },
      h("button", { disabled: !cursor, onclick: () => go("/runs", { ...f, cursor: stack[stack.length - 1] || "", back: stack.slice(0, -1).join(",") }) }, "← Previous"),
      h("button", { disabled: !page.next_cursor, onclick: () => go("/runs", { ...f, cursor: page.next_cursor, back: [...stack, cursor].join(",") }) }, "Next →")));
}

async function runDetail(view, id) {
  const run = await api("GET", `/runs/${id}`);
  const buttons = [];
  if (canWrite() && (run.state === "scheduled" || run.state === "running")) {
    buttons.push(h("button", { class: "danger", id: "run-cancel", onclick: () => act("Cancel run", () => api("POST", `/runs/${id}/cancel`)) }, "Cancel run"));
  }
  if (canWrite() && run.state === "dead") {
    buttons.push(h("button", { class: "primary", id: "run-replay", onclick: () => act("Replay", () => api("POST", `/dead-letters/${id}/replay`)) }, "Replay"));
  }
  const progress = run.progress === null || run.progress === undefined ? "—" :
    h("span", {}, h("span", { class: "progress", role: "progressbar", "aria-valuenow": Math.round(run.progress * 100), "aria-valuemin": 0, "aria-valuemax": 100 },
      (() => { const bar = h("span"); bar.style.width = `${run.progress * 100}%`; return bar; })()),
    ` ${Math.round(run.progress * 100)}% ${run.progress_message || ""}`);
  const fields = [
    ["id", run.id], ["job", h("a", { href: `#/jobs/${run.job_id}` }, run.job_name)],
    ["state", state(run.state)], ["reason", run.reason || "—"], ["trigger", run.trigger],
    ["scheduled", fmtInstant(run.scheduled_for)], ["available", fmtInstant(run.available_at)],
    ["started", fmtInstant(run.started_at)], ["finished", fmtInstant(run.finished_at)],
    ["attempt", `${run.attempt} of ${run.max_attempts}`], ["replays", run.replays],
    ["lease", run.lease_owner ? `${run.lease_owner} until ${fmtInstant(run.lease_expires_at)} (token ${run.token})` : "—"],
    ["progress", progress],
    ["last error", [run.last_error_class, run.last_error_message].filter(Boolean).join(": ") || "—"],
  ];
  fill(view, 
    h("p", {}, h("a", { href: "#/runs" }, "← Runs")),
    h("h1", {}, `Run ${run.id.slice(0, 8)} of ${run.job_name}`),
    h("div", { class: "toolbar" }, buttons),
    h("dl", { class: "fields" }, fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, "Payload"), h("pre", {}, JSON.stringify(run.payload, null, 2)),
    h("h2", {}, "Checkpoint"), h("pre", {}, JSON.stringify(run.checkpoint ?? null, null, 2)),
    h("h2", {}, "Attempts"),
    table(["#", "outcome", "worker", "started", "duration", "error"], (run.attempts || []).map((a) => h("tr", {},
      h("td", { class: "num" }, a.number), h("td", {}, state(a.outcome)), h("td", {}, a.worker_id),
      h("td", {}, fmtInstant(a.started_at)), h("td", {}, fmtSeconds(a.duration_seconds)),
      h("td", {}, [a.error_class, a.error_message].filter(Boolean).join(": ")))), "no attempt yet"),
    // tracebacks as text nodes (h() never parses markup), each folded under its attempt
    ...(run.attempts || []).filter((a) => a.traceback).map((a) =>
      h("details", { class: "traceback", "data-keep": `traceback-${a.number}`, open: a.number === run.attempts.at(-1).number },
        h("summary", {}, `Attempt ${a.number} traceback (${a.error_class || a.outcome})`),
        h("pre", { class: "traceback", "data-attempt": a.number }, a.traceback))),
  );
}

async function deadLetters(view, params) {
  const cursor = params.get("cursor") || "";
  const page = await api("GET", "/dead-letters" + query({ cursor, limit: PAGE }));
  const selected = new Set();
  const replaySelected = h("button", { id: "dlq-replay-selected", class: "primary", disabled: true, onclick: () =>
    act(`Replay ${selected.size}`, async () => {
      for (const id of selected) await api("POST", `/dead-letters/${id}/replay`);
    }) }, "Replay selected");
  const replayAll = h("button", { id: "dlq-replay-all", onclick: () => {
    if (confirm("Replay every dead run of this tenant (up to 1000)?")) act("Replay all", () => api("POST", "/dead-letters/replay", { all: true, limit: 1000 }));
  } }, "Replay all");
  const rows = page.items.flatMap((r) => {
    const detail = h("tr", { class: "inspect", hidden: true },
      h("td", { colspan: 6 },
        h("strong", {}, "error: "), [r.last_error_class, r.last_error_message].filter(Boolean).join(": ") || "—",
        h("div", {}, h("strong", {}, "payload:")), h("pre", {}, JSON.stringify(r.payload, null, 2))));
    const box = h("input", { type: "checkbox", "aria-label": `select run ${r.id}`, onchange: (e) => {
      if (e.target.checked) selected.add(r.id); else selected.delete(r.id);
      replaySelected.disabled = selected.size === 0;
      replaySelected.textContent = selected.size ? `Replay selected (${selected.size})` : "Replay selected";
    } });
    const inspect = h("button", { class: "inspect-btn", "aria-expanded": "false", onclick: (e) => {
      detail.hidden = !detail.hidden;
      e.target.setAttribute("aria-expanded", String(!detail.hidden));
    } }, "Inspect");
    const replay = canWrite() ? h("button", { class: "replay-one", "data-run": r.id, onclick: () =>
      act("Replay", () => api("POST", `/dead-letters/${r.id}/replay`)) }, "Replay") : null;
    return [h("tr", { "data-run": r.id },
      h("td", {}, canWrite() ? box : null),
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id.slice(0, 8))),
      h("td", {}, h("a", { href: `#/jobs/${r.job_id}` }, r.job_name)),
      h("td", {}, fmtInstant(r.finished_at)),
      h("td", {}, [r.reason, r.last_error_class].filter(Boolean).join(": ")),
      h("td", {}, inspect, " ", replay)), detail];
  });
  fill(view, h("h1", {}, "Dead letters"),
    h("div", { class: "toolbar" }, canWrite() ? [replaySelected, replayAll] : null),
    table(["", "run", "job", "died (UTC)", "reason", ""], rows, "the dead-letter queue is empty"),
    h("div", { class: "pager" },
      h("button", { disabled: !page.next_cursor, onclick: () => go("/dead-letters", { cursor: page.next_cursor }) }, "Next →")));
}

// --- shell -------------------------------------------------------------------------------------

const PAGES = {
  "": overview, jobs, runs, "dead-letters": deadLetters,
  audit: (view, params) => auditPage(view, params, { h, api, fill, table, go, query, fmtInstant, pageSize: PAGE }),
  workflows: (view, params) => workflowsPage(view, params, workflowKit()),
};

function workflowKit() {
  return { h, api, fill, table, go, query, fmtInstant, fmtSeconds, state, canWrite, act, say, pageSize: PAGE };
}

// Whether the user is in the middle of something a refresh would undo: a form field of the
// page changed but not submitted yet, or checkboxes ticked (dead letters).
function busy() {
  const view = document.getElementById("view");
  for (const el of view.querySelectorAll("input, select, textarea")) {
    if (el.type === "checkbox" ? el.checked : el.tagName === "SELECT"
      ? [...el.options].some((o) => o.selected !== o.defaultSelected)
      : el.value !== el.defaultValue) return true;
  }
  return false;
}

// Live updates: the page's data again, in place (no reload), every REFRESH_MS while the tab is
// visible; folded sections the user opened stay open.
function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    if (document.hidden) return;  // resumed by visibilitychange
    if (busy() || rendering) { scheduleRefresh(); return; }
    await render({ refresh: true });
  }, REFRESH_MS);
}

async function render({ refresh = false } = {}) {
  clearTimeout(refreshTimer);
  rendering = true;
  refreshing = refresh;
  try {
    await renderPage(refresh);
  } finally {
    rendering = false;
    refreshing = false;
    if (me) scheduleRefresh();
  }
}

async function renderPage(refresh) {
  const { parts, params } = route();
  const view = document.getElementById("view");
  const page = parts[0] || "";
  for (const link of document.querySelectorAll("nav a")) {
    const current = (link.dataset.page === "overview" ? "" : link.dataset.page) === page;
    link.classList.toggle("current", current);
    if (current) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  if (!me) {
    fill(view, h("h1", {}, "duetime"),
      h("p", {}, "Enter an API key above (create one with ", h("code", {}, "duetime keys create"), ")."));
    view.dataset.loaded = "login";
    return;
  }
  const hash = location.hash || "#/";
  const kept = refresh ? new Set([...view.querySelectorAll("details[open][data-keep]")].map((d) => d.dataset.keep)) : null;
  const scroll = window.scrollY;
  const focused = refresh && view.contains(document.activeElement) ? document.activeElement.id : "";
  try {
    if (page === "jobs" && parts[1]) await jobDetail(view, parts[1]);
    else if (page === "runs" && parts[1]) await runDetail(view, parts[1]);
    else if (page === "workflows" && parts[1]) await workflowInstancePage(view, parts[1], workflowKit());
    else if (PAGES[page]) await PAGES[page](view, params);
    else fill(view, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Overview")));
  } catch (err) {
    if (refresh && (location.hash || "#/") === hash) {  // keep the last good data on screen
      say(`Refresh failed: ${err.message}`, true);
      return;
    }
    fill(view, h("h1", {}, "Error"), h("p", { class: "notes" }, err.message));
  }
  if (kept) {
    for (const d of view.querySelectorAll("details[data-keep]")) d.open = kept.has(d.dataset.keep);
    window.scrollTo(0, scroll);
    const again = focused && document.getElementById(focused);
    if (again) again.focus({ preventScroll: true });
  }
  view.dataset.loaded = hash;
  view.dataset.refreshed = String(Number(view.dataset.refreshed || 0) + (refresh ? 1 : 0));
}

function keyboard() {
  let pending = null;
  document.addEventListener("keydown", (e) => {
    const target = e.target;
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) {
      if (e.key === "Escape") target.blur();
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (pending === "g") {
      pending = null;
      const dest = { o: "/", j: "/jobs", r: "/runs", d: "/dead-letters", w: "/workflows" }[e.key];
      if (dest) { e.preventDefault(); go(dest); }
      return;
    }
    if (e.key === "g") { pending = "g"; setTimeout(() => { pending = null; }, 1500); return; }
    if (e.key === "/") {
      const search = document.getElementById("job-search");
      e.preventDefault();
      if (search) search.focus(); else go("/jobs");
    } else if (e.key === "r") {
      render();
    }
  });
}

async function main() {
  // unknown mode (the request failed): ask for a key rather than hide the box
  config = await fetch("/dashboard-config").then((r) => r.json()).catch(() => ({ auth_required: true }));
  showKeyBox();
  const form = document.getElementById("key-form");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const key = document.getElementById("key-input").value.trim();
    if (key) localStorage.setItem(KEY, key);
    const tenant = document.getElementById("tenant-input").value.trim();
    if (tenant) localStorage.setItem(TENANT, tenant); else localStorage.removeItem(TENANT);
    document.getElementById("key-input").value = "";
    const accepted = await identify();
    if (accepted) say("API key accepted");
    await render();
    if (accepted) document.getElementById("view").focus({ preventScroll: true });
  });
  document.getElementById("key-forget").addEventListener("click", async () => {
    localStorage.removeItem(KEY);
    localStorage.removeItem(TENANT);
    await identify();
    render();
  });
  keyboard();
  window.addEventListener("hashchange", () => {
    render().then(() => document.getElementById("view").focus({ preventScroll: true }));
  });
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && me && !rendering) render({ refresh: true });
  });
  await identify();
  await render();
}

main();
