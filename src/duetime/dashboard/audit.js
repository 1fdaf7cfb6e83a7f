// The audit page (#/audit): who changed what, when — the tenant's audit trail, newest first,
// filtered by actor, action and subject, a page at a time (GET /api/v1/audit; admins only:
// the nav link shows for admin and superadmin keys). The page gets app.js's helpers as `kit`.

const ACTIONS = [
  "", "created", "updated", "paused", "resumed", "cancelled", "deleted", "triggered",
  "replayed", "revoked", "limits_set", "alert_webhooks_set",
];
export const AUDIT_FILTERS = ["actor", "action", "subject"];

function describeChange(change) {
  if (change === null || change === undefined) return "";
  if (change.before && change.after) {
    return Object.keys(change.after).map((k) =>
      `${k}: ${JSON.stringify(change.before[k])} → ${JSON.stringify(change.after[k])}`).join("; ");
  }
  return JSON.stringify(change.after || change);
}

export async function auditPage(view, params, kit) {
  const { h, api, fill, table, go, query, fmtInstant, pageSize } = kit;
  const f = Object.fromEntries(AUDIT_FILTERS.map((k) => [k, params.get(k) || ""]));
  const cursor = params.get("cursor") || "";
  const back = params.get("back") || "";
  const page = await api("GET", "/audit" + query({ ...f, cursor, limit: pageSize }));
  const actor = h("input", { id: "audit-actor", placeholder: "actor", value: f.actor, "aria-label": "Filter by actor" });
  const subject = h("input", { id: "audit-subject", placeholder: "subject (name or id)", value: f.subject, "aria-label": "Filter by subject" });
  const action = h("select", { id: "audit-action", "aria-label": "Filter by action" },
    ACTIONS.map((v) => h("option", { value: v, selected: v === f.action }, v || "any action")));
  const current = () => ({ actor: actor.value.trim(), action: action.value, subject: subject.value.trim() });
  const form = h("form", { class: "toolbar", role: "search", id: "audit-filters", onsubmit: (e) => {
    e.preventDefault();
    go("/audit", current());
  } },
  actor, action, subject,
  h("button", { type: "submit" }, "Filter"),
  h("button", { type: "button", id: "audit-clear", onclick: () => go("/audit") }, "Clear"));
  action.addEventListener("change", () => form.requestSubmit());
  const rows = page.items.map((r) => h("tr", {},
    h("td", {}, fmtInstant(r.at)),
    h("td", {}, r.actor),
    h("td", {}, r.action),
    h("td", {}, `${r.subject_kind} ${r.subject_name || r.subject_id || ""}`.trim()),
    h("td", { class: "notes" }, describeChange(r.change))));
  const stack = back ? back.split(",") : [];
  fill(view, h("h1", {}, "Audit"), form,
    table(["when (UTC)", "actor", "action", "subject", "change"], rows, "no audit records"),
    h("div", { class: "pager" },
      h("button", { disabled: !cursor, onclick: () => go("/audit", { ...f, cursor: stack[stack.length - 1] || "", back: stack.slice(0, -1).join(",") }) }, "← Previous"),
      h("button", { disabled: !page.next_cursor, onclick: () => go("/audit", { ...f, cursor: page.next_cursor, back: [...stack, cursor].join(",") }) }, "Next →")));
}
