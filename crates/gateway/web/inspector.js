// The right pane: Files (tree + editor), Prompt (system prompt as sent, tools),
// Tokens (session and per bootstrap file), Skills, Activity (approvals, usage,
// audit, gateway status and cron).

import { api } from "./api.js";
import { $, $$, el, clear, toast, fmtBytes, fmtNumber, fmtTokens, fmtDateTime, pretty } from "./util.js";
import { state, on, emit } from "./state.js";
import { approvalCard } from "./approvals.js";
import { openFile, refresh as refreshEditor, currentPath } from "./editor.js";
import { copyText } from "./markdown.js";
import { icon } from "./icons.js";

const GROUPS = [
  ["bootstrap", "Bootstrap"],
  ["memory", "Memory"],
  ["knowledge", "Knowledge"],
  ["skills", "Skills"],
];

let active = "files";
const loaders = {};
let pending = [];

export function activeTab() {
  return active;
}

export function selectTab(name) {
  active = name;
  for (const t of $$(".tabs .tab")) {
    const on_ = t.dataset.tab === name;
    t.setAttribute("aria-selected", String(on_));
    t.tabIndex = on_ ? 0 : -1;
  }
  for (const p of $$("#inspector .panel")) p.hidden = p.id !== `panel-${name}`;
  if (name === "files") refreshEditor();
  load(name);
}

function load(name) {
  const fn = loaders[name];
  if (fn) fn();
}

function panel(name) {
  return $(`#panel-${name}`);
}

function section(title, ...children) {
  return el("section.card", null, el("h3", { text: title }), ...children);
}

function errorBox(e) {
  return el("p.error-text", { text: `Could not load: ${e.message}` });
}

function needSession(p) {
  clear(p);
  p.append(el("p.muted.pad", { text: "Start or open a session to see this." }));
}

// ---------- Files ----------

export async function loadFiles() {
  const tree = $("#file-tree");
  try {
    const r = await api.files(state.agent);
    state.files = (r && r.files) || [];
    $("#workspace-path").textContent = (r && r.workspace) || "";
    $("#workspace-path").title = (r && r.workspace) || "";
  } catch (e) {
    clear(tree).append(errorBox(e));
    return;
  }
  clear(tree);
  const known = new Set(GROUPS.map((g) => g[0]));
  const groups = [...GROUPS, ["other", "Other"]];
  for (const [key, label] of groups) {
    const files = state.files.filter((f) => (known.has(f.group) ? f.group === key : key === "other"));
    if (!files.length) continue;
    tree.append(
      el(
        "div.file-group",
        { dataset: { group: key } },
        el("h3.file-group-title", { text: label }),
        el(
          "ul",
          null,
          files.map((f) => {
            const slash = f.path.lastIndexOf("/");
            return el(
              "li",
              null,
              el(
                "button.file-item",
                {
                  type: "button",
                  dataset: { path: f.path },
                  title: `${f.path}${f.modified ? ` · modified ${fmtDateTime(f.modified)}` : ""}`,
                  className: f.path === currentPath() ? "file-item active" : "file-item",
                  "aria-current": f.path === currentPath() ? "true" : false,
                },
                el("span.file-name", null, slash > 0 ? el("span.file-dir", { text: f.path.slice(0, slash + 1) }) : null, f.path.slice(slash + 1)),
                f.protected ? el("span.lock", { title: "Protected: read-only", role: "img", "aria-label": "protected" }, icon("lock", 12)) : null,
                el("span.file-size", { text: fmtBytes(f.size) }),
              ),
            );
          }),
        ),
      ),
    );
  }
  if (!state.files.length) tree.append(el("p.muted.pad", { text: "No editable files in this workspace." }));
}

// ---------- Prompt ----------

loaders.prompt = async () => {
  const p = panel("prompt");
  const id = state.current;
  if (!id) return needSession(p);
  if (!p.firstChild) p.append(el("p.muted.pad", { text: "Loading…" }));
  let r;
  try {
    r = await api.messages(id);
  } catch (e) {
    clear(p).append(errorBox(e));
    return;
  }
  if (state.current !== id) return;
  clear(p);
  const system = r.system || "";
  const copy = el("button.small", { type: "button", text: "Copy" });
  copy.addEventListener("click", () => copyText(system, copy));
  p.append(
    el(
      "section.card",
      null,
      el("div.card-head", null, el("h3", { text: "System prompt" }), el("span.muted.small-text", { text: `${fmtNumber(system.length)} characters` }), copy),
      el("p.muted.small-text", { text: "Exactly as the next turn of this session would send it." }),
      el("pre.system-prompt", { text: system || "(empty)" }),
    ),
  );
  const tools = Array.isArray(r.tools) ? r.tools : [];
  p.append(
    section(
      `Tools (${tools.length})`,
      el(
        "ul.tool-list",
        null,
        tools.map((t) => el("li", null, el("code", { text: t.name }), el("span.muted", { text: t.description ? ` ${t.description}` : "" }))),
      ),
    ),
  );
  const messages = Array.isArray(r.messages) ? r.messages : [];
  const raw = pretty(messages);
  p.append(
    el(
      "details.card.raw-messages",
      null,
      el("summary", { text: `Raw messages (${messages.length})` }),
      el("pre.raw-json", { text: raw.length > 400000 ? `${raw.slice(0, 400000)}\n… (truncated)` : raw }),
    ),
  );
};

// ---------- Tokens ----------

function bar(parts, total) {
  const b = el("div.stack-bar", { role: "img", "aria-label": parts.map((x) => `${x.label} ${x.value}`).join(", ") });
  for (const x of parts) {
    const seg = el(`span.seg.${x.cls}`, { title: `${x.label}: ${fmtNumber(x.value)}` });
    seg.style.width = `${total ? Math.max(0, (100 * x.value) / total) : 0}%`;
    b.append(seg);
  }
  return b;
}

loaders.tokens = async () => {
  const p = panel("tokens");
  const id = state.current;
  if (!p.firstChild) p.append(el("p.muted.pad", { text: "Loading…" }));
  const sessionCard = el("section.card", null, el("h3", { text: "This session" }));
  if (id) {
    try {
      const t = await api.sessionTokens(id);
      const parts = [
        { label: "System prompt", value: t.systemTokens || 0, cls: "tk-system" },
        { label: "Messages", value: t.messageTokens || 0, cls: "tk-messages" },
        { label: "Tools", value: t.toolTokens || 0, cls: "tk-tools" },
      ];
      const total = t.totalTokens || parts.reduce((a, x) => a + x.value, 0);
      const win = t.contextWindow || 0;
      sessionCard.append(
        el("div.big-number", null, el("strong", { text: fmtNumber(total) }), el("span.muted", { text: win ? ` of ${fmtNumber(win)} tokens (${((100 * total) / win).toFixed(1)}%)` : " tokens" })),
        bar(parts, win || total),
        el(
          "ul.legend",
          null,
          parts.map((x) => el("li", null, el(`span.swatch.${x.cls}`), `${x.label}: `, el("strong", { text: fmtNumber(x.value) }))),
        ),
        el("p.muted.small-text", { text: t.exact ? "Exact counts from the model's tokenizer." : "Estimated counts." }),
      );
    } catch (e) {
      sessionCard.append(errorBox(e));
    }
  } else sessionCard.append(el("p.muted", { text: "No session yet." }));

  const filesCard = el("section.card", null, el("h3", { text: "Bootstrap files" }), el("p.muted.small-text", { text: "What each file adds to every system prompt." }));
  if (!state.files.length) await loadFiles();
  const boot = state.files.filter((f) => f.group === "bootstrap").map((f) => f.path);
  if (boot.length) {
    try {
      const r = await api.fileTokens(boot, state.agent);
      const rows = (r && r.files) || [];
      const max = Math.max(1, ...rows.map((x) => x.tokens || 0));
      const sum = rows.reduce((a, x) => a + (x.tokens || 0), 0);
      filesCard.append(
        el(
          "table.file-tokens",
          null,
          el("tbody", null, rows.map((x) => {
            const fill = el("span.hbar-fill");
            fill.style.width = `${(100 * (x.tokens || 0)) / max}%`;
            return el("tr", null, el("td.mono", { text: x.path }), el("td.hbar-cell", null, el("span.hbar", null, fill)), el("td.num", { text: fmtNumber(x.tokens) }));
          })),
          el("tfoot", null, el("tr", null, el("td", { text: "Total" }), el("td"), el("td.num", { text: fmtNumber(sum) }))),
        ),
      );
    } catch (e) {
      filesCard.append(errorBox(e));
    }
  } else filesCard.append(el("p.muted", { text: "No bootstrap files." }));
  if (state.current !== id) return;
  clear(p).append(sessionCard, filesCard);
};

// ---------- Skills ----------

loaders.skills = async () => {
  const p = panel("skills");
  if (!p.firstChild) p.append(el("p.muted.pad", { text: "Loading…" }));
  let r;
  try {
    r = await api.skills(state.agent);
  } catch (e) {
    clear(p).append(errorBox(e));
    return;
  }
  const skills = (r && r.data) || [];
  clear(p);
  if (!skills.length) {
    p.append(el("p.muted.pad", { text: "No skills installed." }));
    return;
  }
  p.append(
    el(
      "ul.skill-list",
      null,
      skills.map((s) => {
        const rel = relativeSkillPath(s.path);
        const openBtn = rel ? el("button.small.link", { type: "button", text: "Edit", "aria-label": `Edit skill ${s.name}` }) : null;
        if (openBtn) openBtn.addEventListener("click", () => {
          selectTab("files");
          openFile(rel);
        });
        return el(
          "li.skill",
          { className: s.available === false ? "skill unavailable" : "skill" },
          el(
            "div.skill-head",
            null,
            el("strong", { text: s.name }),
            s.source ? el("span.chip", { text: s.source }) : null,
            s.available === false ? el("span.chip.warn", { text: "unavailable" }) : el("span.chip.ok", { text: "available" }),
            el("span.spacer"),
            openBtn,
          ),
          s.description ? el("p", { text: s.description }) : null,
          s.available === false && s.reason ? el("p.muted.small-text", { text: s.reason }) : null,
          s.path ? el("p.mono.muted.small-text.ellipsis", { text: s.path, title: s.path }) : null,
        );
      }),
    ),
  );
};

function relativeSkillPath(path) {
  if (!path) return null;
  const hit = state.files.find((f) => f.path === path || path.endsWith(`/${f.path}`));
  return hit ? hit.path : null;
}

// ---------- Activity ----------

function renderApprovals(host) {
  clear(host);
  host.append(el("h3", { text: `Pending approvals (${pending.length})` }));
  if (!pending.length) host.append(el("p.muted", { text: "Nothing is waiting." }));
  for (const a of pending) {
    const card = approvalCard(a);
    const where = el("button.link.small-text.mono.ellipsis.approval-where", { type: "button", title: "Open this session", text: [a.agent, a.session].filter(Boolean).join(" · ") || "session" });
    where.addEventListener("click", () => {
      if (a.session) location.hash = `#session=${encodeURIComponent(a.session)}`;
    });
    card.prepend(where);
    host.append(card);
  }
}

loaders.activity = async () => {
  const p = panel("activity");
  if (!p.querySelector("#approvals-card")) {
    clear(p);
    p.append(
      el("section.card#approvals-card"),
      el("section.card#usage-card", null, el("h3", { text: "Usage (30 days)" })),
      el("section.card#status-card", null, el("h3", { text: "Gateway" })),
      el("section.card#audit-card", null, el("h3", { text: "Audit log" })),
    );
  }
  renderApprovals($("#approvals-card"));
  const [usage, status, audit] = await Promise.allSettled([api.usage(30), api.status(), api.audit(50)]);
  renderUsage($("#usage-card"), usage);
  renderStatus($("#status-card"), status);
  renderAudit($("#audit-card"), audit);
};

function renderUsage(host, res) {
  clear(host).append(el("h3", { text: "Usage (30 days)" }));
  if (res.status === "rejected") return host.append(errorBox(res.reason));
  const u = res.value || {};
  const days = Array.isArray(u.days) ? u.days : [];
  const sum = (k) => days.reduce((a, d) => a + Number(d[k] || 0), 0);
  const cost = days.some((d) => d.costUsd !== undefined && d.costUsd !== null) ? sum("costUsd") : null;
  host.append(
    el(
      "div.stats",
      null,
      stat("Calls", fmtNumber(sum("calls"))),
      stat("Input", fmtTokens(sum("inputTokens"))),
      stat("Output", fmtTokens(sum("outputTokens"))),
      cost !== null ? stat("Cost", `$${cost.toFixed(2)}`) : null,
    ),
  );
  if (days.length) {
    const max = Math.max(1, ...days.map((d) => Number(d.inputTokens || 0) + Number(d.outputTokens || 0)));
    const chart = el("div.day-chart", { role: "img", "aria-label": "Tokens per day" });
    for (const d of days) {
      const col = el("span.day-col", { title: `${d.date}: ${fmtNumber(d.inputTokens)} in, ${fmtNumber(d.outputTokens)} out, ${fmtNumber(d.calls)} calls` });
      col.style.height = `${(100 * (Number(d.inputTokens || 0) + Number(d.outputTokens || 0))) / max}%`;
      chart.append(col);
    }
    host.append(chart);
  }
  const models = Array.isArray(u.byModel) ? u.byModel : [];
  if (models.length) {
    host.append(
      el(
        "table.data-table",
        null,
        el("thead", null, el("tr", null, ["Model", "Calls", "In", "Out"].map((h) => el("th", { text: h })))),
        el("tbody", null, models.map((m) => el("tr", null, el("td.mono", { text: m.model }), el("td.num", { text: fmtNumber(m.calls) }), el("td.num", { text: fmtTokens(m.inputTokens) }), el("td.num", { text: fmtTokens(m.outputTokens) })))),
      ),
    );
  }
}

function stat(label, value) {
  return el("div.stat", null, el("span.stat-value", { text: value }), el("span.stat-label", { text: label }));
}

function fmtUptime(s) {
  s = Number(s);
  if (!Number.isFinite(s)) return String(s);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : `${m}m ${Math.floor(s % 60)}s`;
}

function renderValue(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (Array.isArray(v) && !v.length) return "none";
  if (typeof v === "object") return Array.isArray(v) && v.every((x) => typeof x !== "object") ? v.join(", ") : null;
  return String(v);
}

function renderStatus(host, res) {
  clear(host).append(el("h3", { text: "Gateway" }));
  if (res.status === "rejected") return host.append(errorBox(res.reason));
  const s = res.value || {};
  const dl = el("dl.kv");
  const nested = [];
  for (const [k, v] of Object.entries(s)) {
    if (k === "cron") continue;
    const key = k.replace(/([A-Z])/g, " $1").toLowerCase();
    const shown = /uptime/i.test(k) && typeof v === "number" ? fmtUptime(v) : renderValue(v);
    if (shown === null) nested.push([key, v]);
    else dl.append(el("dt", { text: key }), el("dd", { text: shown }));
  }
  host.append(dl);
  for (const [key, v] of nested) {
    host.append(el("details.nested", null, el("summary", { text: `${key} (${Array.isArray(v) ? v.length : Object.keys(v).length})` }), el("pre.raw-json", { text: pretty(v) })));
  }
  const cron = Array.isArray(s.cron) ? s.cron : [];
  host.append(el("h4", { text: `Cron (${cron.length})` }));
  if (cron.length) {
    host.append(
      el(
        "table.data-table",
        null,
        el("thead", null, el("tr", null, ["Job", "Schedule", "Next run", ""].map((h) => el("th", { text: h })))),
        el("tbody", null, cron.map((c) => el("tr", { className: c.enabled === false ? "disabled-row" : "" }, el("td", { text: c.name || c.id }), el("td.mono", { text: c.schedule || "" }), el("td", { text: fmtDateTime(c.nextRun) }), el("td", { text: c.enabled === false ? "off" : "on" })))),
      ),
    );
  } else host.append(el("p.muted", { text: "No scheduled jobs." }));
}

function renderAudit(host, res) {
  clear(host).append(el("h3", { text: "Audit log" }));
  if (res.status === "rejected") return host.append(errorBox(res.reason));
  const rows = (res.value && res.value.data) || [];
  if (!rows.length) return host.append(el("p.muted", { text: "No entries yet." }));
  host.append(
    el(
      "ul.audit-list",
      null,
      rows.map((a) =>
        el(
          "li",
          { className: a.ok === false ? "audit-item failed" : "audit-item" },
          el("div.audit-head", null, el("code", { text: a.tool || "?" }), el("span.chip", { text: a.decision || "" }), el("span.spacer"), el("span.muted.small-text", { text: fmtDateTime(a.time) })),
          a.summary ? el("div.audit-summary", { text: a.summary }) : null,
          el("div.muted.small-text.mono.ellipsis", { text: [a.agent, a.session].filter(Boolean).join(" · ") }),
        ),
      ),
    ),
  );
}

// ---------- wiring ----------

export function initInspector() {
  loaders.files = loadFiles;
  const tabs = $$(".tabs .tab");
  for (const t of tabs) {
    t.addEventListener("click", () => selectTab(t.dataset.tab));
    t.addEventListener("keydown", (ev) => {
      if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") return;
      const i = tabs.indexOf(t);
      const next = tabs[(i + (ev.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      selectTab(next.dataset.tab);
    });
  }
  $("#file-tree").addEventListener("click", (ev) => {
    const item = ev.target.closest(".file-item");
    if (item) openFile(item.dataset.path);
  });
  $("#refresh-files").addEventListener("click", loadFiles);
  on("session-changed", () => {
    if (active === "prompt" || active === "tokens") load(active);
  });
  on("turn-finished", () => {
    if (active !== "files") load(active);
  });
  on("file-saved", () => {
    loadFiles();
    if (active === "tokens") load("tokens");
  });
  on("approvals", (list) => {
    const before = pending.map((a) => a.id).join(",");
    pending = list || [];
    const badge = $("#approval-badge");
    badge.textContent = String(pending.length);
    badge.hidden = pending.length === 0;
    const changed = before !== pending.map((a) => a.id).join(",");
    if (changed && active === "activity" && $("#approvals-card")) renderApprovals($("#approvals-card"));
  });
  on("agent-changed", () => {
    loadFiles();
    load(active);
  });
  selectTab("files");
}

export function reloadActive() {
  load(active);
  emit("inspector-reloaded");
}

export { toast };
