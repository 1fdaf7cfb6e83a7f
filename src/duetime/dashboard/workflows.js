// The workflows pages: #/workflows (instances, filtered by workflow and state) and
// #/workflows/<instance id> (the instance's graph, drawn by dag.js, coloured by step state;
// a click on a step shows its result, attempts and traceback, or why it has not started).
// While an instance runs its view polls GET /workflow-instances/{id} every POLL_MS and redraws
// in place (no reload); it stops once the instance has ended or the user left the page.
// The pages get app.js's helpers as `kit`.

import { drawDag, layout, nodeCaption } from "/dashboard/dag.js";
import { durationSeconds } from "/dashboard/chart.js";

const POLL_MS = 1500;
const INSTANCE_STATES = ["", "running", "succeeded", "failed", "cancelled"];
const STARTED = new Set(["running", "succeeded", "failed", "cancelled"]);

let poll = null; // {id, timer}: the instance view's live update
const chosen = { instance: null, step: null, index: -1 }; // the step (and item) shown

function stopPolling() {
  if (poll) clearTimeout(poll.timer);
  poll = null;
}

export async function workflowsPage(view, params, kit) {
  stopPolling();
  const { h, api, fill, table, go, query, fmtInstant, fmtSeconds, state, pageSize } = kit;
  const f = { workflow: params.get("workflow") || "", state: params.get("state") || "" };
  const [workflows, instances] = await Promise.all([
    api("GET", "/workflows"),
    api("GET", "/workflow-instances" + query({ ...f, limit: pageSize })),
  ]);
  const names = [...new Set(["", ...workflows.map((w) => w.name), f.workflow].filter((n) => n !== undefined))];
  const workflow = h("select", { id: "wf-workflow", "aria-label": "Filter by workflow" },
    names.map((n) => h("option", { value: n, selected: n === f.workflow }, n || "any workflow")));
  const select = h("select", { id: "wf-state", "aria-label": "Filter by state" },
    INSTANCE_STATES.map((v) => h("option", { value: v, selected: v === f.state }, v || "any state")));
  const form = h("form", { class: "toolbar", role: "search", id: "wf-filters", onsubmit: (e) => {
    e.preventDefault();
    go("/workflows", { workflow: workflow.value, state: select.value });
  } },
  workflow, select,
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", id: "wf-clear", onclick: () => go("/workflows") }, "Clear"));
  for (const el of [workflow, select]) el.addEventListener("change", () => form.requestSubmit());
  const now = Date.now();
  const rows = instances.map((i) => h("tr", { "data-instance": i.id },
    h("td", {}, h("a", { href: `#/workflows/${i.id}` }, i.id.slice(0, 8))),
    h("td", {}, `${i.workflow} v${i.version}`),
    h("td", {}, state(i.state)),
    h("td", {}, fmtInstant(i.created_at)),
    h("td", {}, fmtInstant(i.finished_at)),
    h("td", { class: "num" }, fmtSeconds(durationSeconds(i.created_at, i.finished_at, now))),
    h("td", {}, i.reason || "")));
  const versions = workflows.map((w) => h("li", {},
    h("a", { href: "#/workflows" + query({ workflow: w.name }) }, w.name),
    ` v${w.version} · ${w.steps} step(s) · registered ${fmtInstant(w.created_at)}`));
  fill(view, h("h1", {}, "Workflows"), form,
    table(["instance", "workflow", "state", "started (UTC)", "ended (UTC)", "duration", "reason"], rows,
      "no workflow instance"),
    h("h2", {}, "Registered"),
    versions.length ? h("ul", { class: "wf-versions" }, versions) : h("div", { class: "empty" }, "no workflow registered"));
}

// Step name → {state, items?, title} for dag.js, from the instance's step rows.
function stepViews(definition, steps) {
  const views = new Map();
  for (const spec of definition.steps) {
    const own = steps.find((r) => r.step === spec.name && r.map_index === -1);
    const items = steps.filter((r) => r.step === spec.name && r.map_index >= 0);
    const view = { state: own ? own.state : "pending" };
    if (spec.map_over && (items.length || (own && STARTED.has(own.state)))) {
      view.items = {
        total: items.length,
        done: items.filter((r) => r.state === "succeeded").length,
        failed: items.filter((r) => r.state === "failed").length,
      };
    }
    view.title = `${spec.name}: ${nodeCaption(view)}${own && own.reason ? ` — ${own.reason}` : ""}`;
    views.set(spec.name, view);
  }
  return views;
}

// Every edge once, with a mapped step's edge from its source (an on_success one).
function edgesOf(instance) {
  const edges = [...(instance.edges || [])];
  for (const spec of instance.definition.steps) {
    if (spec.map_over && !edges.some((e) => e.from === spec.map_over && e.to === spec.name)) {
      edges.push({ from: spec.map_over, to: spec.name, on: "on_success" });
    }
  }
  return edges;
}

// An instance whose version was not registered has no document: its steps' names stand in.
function withDefinition(instance) {
  if (instance.definition) return instance;
  const names = [...new Set(instance.steps.map((r) => r.step))];
  return { ...instance, definition: { name: instance.workflow, steps: names.map((name) => ({ name })) } };
}

function describeAfter(instance, name) {
  return edgesOf(instance).filter((e) => e.to === name)
    .map((e) => (e.on === "on_success" ? e.from : `${e.from} (${e.on})`)).join(", ");
}

export async function workflowInstancePage(view, id, kit) {
  stopPolling();
  const { h, api, fill, fmtInstant, fmtSeconds, state, canWrite, act } = kit;
  if (chosen.instance !== id) Object.assign(chosen, { instance: id, step: null, index: -1 });
  let instance = withDefinition(await api("GET", `/workflow-instances/${id}`));
  let explain = [];
  let runCache = new Map(); // run id → [key, run]: a run refetched only when its row changed

  const head = h("div", { id: "wf-head" });
  const graph = h("div", { class: "dag-wrap", id: "wf-graph", "data-instance": id });
  const detail = h("section", { id: "wf-step", "aria-live": "polite" });
  const pending = h("section", { id: "wf-explain" });

  async function readExplain() {
    const waiting = instance.state === "running" &&
      instance.definition.steps.some((spec) => {
        const own = instance.steps.find((r) => r.step === spec.name && r.map_index === -1);
        return !own || own.state === "pending";
      });
    const found = waiting ? await api("GET", `/workflow-instances/${id}/explain`) : [];
    explain = Array.isArray(found) ? found : found.steps || []; // {instance_id, state, steps}
  }

  function drawHead() {
    const buttons = [];
    if (canWrite() && instance.state === "running") {
      buttons.push(h("button", { class: "danger", id: "wf-cancel", onclick: () => {
        if (confirm("Cancel this instance? Pending steps end cancelled, running ones are asked to stop.")) {
          act("Cancel instance", () => api("POST", `/workflow-instances/${id}/cancel`));
        }
      } }, "Cancel instance"));
    }
    if (canWrite() && instance.state === "failed") {
      buttons.push(h("button", { class: "primary", id: "wf-retry", onclick: () =>
        act("Retry from failure", () => api("POST", `/workflow-instances/${id}/retry`)) }, "Retry from failure"));
    }
    const fields = [
      ["state", state(instance.state)], ["reason", instance.reason || "—"],
      ["job", h("a", { href: `#/jobs/${instance.job_id}` }, instance.job_id.slice(0, 8))],
      ["start run", h("a", { href: `#/runs/${instance.start_run_id}` }, instance.start_run_id.slice(0, 8))],
      ["started", fmtInstant(instance.created_at)], ["ended", fmtInstant(instance.finished_at)],
      ["duration", fmtSeconds(durationSeconds(instance.created_at, instance.finished_at, Date.now()))],
    ];
    head.dataset.state = instance.state;
    head.replaceChildren(
      h("div", { class: "toolbar" }, buttons),
      h("dl", { class: "fields" }, fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("details", { "data-keep": "wf-input" }, h("summary", {}, "Input"),
        h("pre", {}, JSON.stringify(instance.input ?? null, null, 2))));
  }

  function drawGraph() {
    const names = instance.definition.steps.map((spec) => spec.name);
    const shape = layout(names, edgesOf(instance));
    const views = stepViews(instance.definition, instance.steps);
    graph.dataset.state = instance.state;
    graph.replaceChildren(drawDag(shape, views, {
      selected: chosen.step,
      onSelect: (name) => {
        Object.assign(chosen, { step: name, index: -1 });
        drawGraph();
        drawDetail();
      },
    }));
  }

  function drawPending() {
    if (!explain.length) { pending.replaceChildren(); return; }
    pending.replaceChildren(h("h2", {}, "Not started yet"),
      h("ul", { class: "wf-why" }, explain.map((x) => h("li", { "data-step": x.step },
        h("strong", {}, x.step), ": ", x.why))));
  }

  async function runOf(row) {
    const key = `${row.state}|${row.attempt}|${row.finished_at}|${row.started_at}`;
    const cached = runCache.get(row.run_id);
    if (cached && cached[0] === key) return cached[1];
    const run = await api("GET", `/runs/${row.run_id}`);
    runCache.set(row.run_id, [key, run]);
    return run;
  }

  async function drawDetail() {
    const name = chosen.step;
    if (!name) {
      detail.replaceChildren(h("p", { class: "muted" }, "Click a step to see its result, attempts and traceback."));
      return;
    }
    const spec = instance.definition.steps.find((x) => x.name === name);
    if (!spec) { chosen.step = null; detail.replaceChildren(); return; }
    const own = instance.steps.find((r) => r.step === name && r.map_index === -1);
    const items = instance.steps.filter((r) => r.step === name && r.map_index >= 0);
    const row = chosen.index >= 0 ? items.find((r) => r.map_index === chosen.index) : own;
    const why = explain.find((x) => x.step === name);
    const fields = [
      ["does", spec.task || (spec.target ? `${spec.target.type || "http"} ${spec.target.url || ""}`.trim() : "—")],
      ["after", describeAfter(instance, name) || "—"], ["rule", spec.rule || "all"],
      ["map over", spec.map_over || "—"],
      ["state", state(own ? own.state : "pending")], ["reason", (own && own.reason) || "—"],
    ];
    const kids = [
      h("h2", {}, `Step ${name}`),
      h("dl", { class: "fields" }, fields.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    ];
    if (why) kids.push(h("p", { class: "summary", id: "wf-why" }, `Not started: ${why.why}`));
    if (items.length) {
      kids.push(h("h3", {}, `Items (${items.length})`), h("div", { class: "table-wrap" }, h("table", { class: "wf-items" },
        h("thead", {}, h("tr", {}, ["#", "state", "run", "reason", ""].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, items.map((r) => h("tr", { "data-index": r.map_index, class: r.map_index === chosen.index ? "current" : null },
          h("td", { class: "num" }, r.map_index), h("td", {}, state(r.state)),
          h("td", {}, r.run_id ? h("a", { href: `#/runs/${r.run_id}` }, r.run_id.slice(0, 8)) : "—"),
          h("td", {}, r.reason || ""),
          h("td", {}, r.run_id ? h("button", { class: "wf-item", onclick: () => {
            chosen.index = r.map_index;
            drawDetail();
          } }, "Show") : null)))))));
    }
    if (row && row.run_id) {
      const run = await runOf(row);
      if (chosen.step !== name) return; // the user chose another step meanwhile
      const label = row.map_index >= 0 ? `Item ${row.map_index}` : "Run";
      kids.push(
        h("h3", {}, `${label}: `, h("a", { href: `#/runs/${row.run_id}`, id: "wf-run-link" }, row.run_id.slice(0, 8)),
          ` · ${run.state} · attempt ${run.attempt} of ${run.max_attempts}`),
        h("h3", {}, "Result"), h("pre", { id: "wf-result" }, JSON.stringify(row.result ?? run.result ?? null, null, 2)),
        h("h3", {}, "Attempts"),
        kit.table(["#", "outcome", "worker", "started", "duration", "error"], (run.attempts || []).map((a) => h("tr", {},
          h("td", { class: "num" }, a.number), h("td", {}, state(a.outcome)), h("td", {}, a.worker_id),
          h("td", {}, fmtInstant(a.started_at)), h("td", {}, fmtSeconds(a.duration_seconds)),
          h("td", {}, [a.error_class, a.error_message].filter(Boolean).join(": ")))), "no attempt yet"),
        ...(run.attempts || []).filter((a) => a.traceback).map((a) =>
          h("details", { class: "traceback", "data-keep": `wf-traceback-${row.run_id}-${a.number}`, open: a.number === run.attempts.at(-1).number },
            h("summary", {}, `Attempt ${a.number} traceback (${a.error_class || a.outcome})`),
            h("pre", { class: "traceback", "data-attempt": a.number }, a.traceback))));
    } else if (row === undefined && chosen.index >= 0) {
      chosen.index = -1;
    }
    const open = new Set([...detail.querySelectorAll("details[open][data-keep]")].map((d) => d.dataset.keep));
    detail.replaceChildren(...kids);
    detail.dataset.step = name; // what the panel shows now (a chosen step's run may still be loading)
    detail.dataset.index = String(chosen.index);
    for (const d of detail.querySelectorAll("details[data-keep]")) if (open.has(d.dataset.keep)) d.open = true;
  }

  // Live: while the instance runs, read it again every POLL_MS and redraw in place.
  function schedule() {
    if (instance.state !== "running") { stopPolling(); return; }
    const mine = { id, timer: null };
    mine.timer = setTimeout(async () => {
      if (poll !== mine || !document.body.contains(graph)) return;
      if (document.hidden) { schedule(); return; }
      try {
        instance = withDefinition(await api("GET", `/workflow-instances/${id}`));
        await readExplain();
        if (poll !== mine || !document.body.contains(graph)) return;
        drawHead();
        drawGraph();
        drawPending();
        await drawDetail();
        graph.dataset.polls = String(Number(graph.dataset.polls || 0) + 1);
      } catch (err) {
        kit.say(`Refresh failed: ${err.message}`, true);
      }
      if (poll === mine) schedule();
    }, POLL_MS);
    poll = mine;
  }

  await readExplain();
  drawHead();
  drawGraph();
  drawPending();
  await drawDetail();
  fill(view,
    h("p", {}, h("a", { href: "#/workflows" }, "← Workflows")),
    h("h1", {}, `Instance ${id.slice(0, 8)} of ${instance.workflow} v${instance.version}`),
    head,
    h("div", { class: "dag-legend", "aria-hidden": "true" },
      ["pending", "running", "succeeded", "failed", "skipped", "cancelled"].map((x) => h("span", { class: `dag-key ${x}` }, x))),
    graph, pending, detail);
  schedule();
}
