// Approval prompts: the same pending approval can be shown inline in the chat and
// in the Activity tab; answering one updates every card showing it.

import { api } from "./api.js";
import { el, toast } from "./util.js";
import { emit } from "./state.js";

const cards = new Map(); // approval id -> Set of card elements
const answered = new Map(); // approval id -> label of the outcome
const firstSeen = new Map(); // approval id -> when the page first learnt of it

const outcome = { approve: "Approved", always: "Approved for this session", deny: "Denied" };

export function isAnswered(id) {
  return answered.has(id);
}

export function approvalCard(a) {
  const riskClass = /high|danger|critical/i.test(a.risk || "") ? "high" : /medium|moderate/i.test(a.risk || "") ? "medium" : "low";
  const buttons = el(
    "div.approval-buttons",
    null,
    el("button.approve.primary.small", { type: "button", "aria-label": `Approve ${a.tool || "tool call"}`, text: "Approve" }),
    a.sessionGrantOffered
      ? el("button.always.small", { type: "button", "aria-label": `Always allow ${a.tool || "this tool"} in this session`, text: "Always" })
      : null,
    el("button.deny.danger.small", { type: "button", "aria-label": `Deny ${a.tool || "tool call"}`, text: "Deny" }),
  );
  const status = el("span.approval-status", { "aria-live": "polite" });
  const card = el(
    "div.approval",
    { role: "group", "aria-label": `Approval for ${a.tool || "a tool call"}`, dataset: { id: a.id } },
    el(
      "div.approval-head",
      null,
      el("span.approval-icon", { "aria-hidden": "true", text: "⚠" }),
      el("strong", { text: "Approval needed" }),
      a.tool ? el("code.approval-tool", { text: a.tool }) : null,
      a.risk ? el(`span.risk.${riskClass}`, { text: a.risk }) : null,
    ),
    a.summary ? el("div.approval-summary", { text: a.summary }) : null,
    Array.isArray(a.needs) && a.needs.length
      ? el("div.approval-needs", null, el("span.muted", { text: "Needs: " }), a.needs.map((n) => el("span.chip", { text: typeof n === "string" ? n : JSON.stringify(n) })))
      : null,
    el("div.approval-foot", null, buttons, status),
  );
  const answer = async (choice, btn) => {
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    btn.classList.add("busy");
    try {
      await api.answerApproval(a.id, choice);
      resolve(a.id, outcome[choice]);
    } catch (e) {
      if (e.status === 404) resolve(a.id, "No longer pending");
      else {
        toast(`Could not answer the approval: ${e.message}`, "error");
        for (const b of buttons.querySelectorAll("button")) b.disabled = false;
      }
    } finally {
      btn.classList.remove("busy");
    }
  };
  buttons.querySelector(".approve").addEventListener("click", (ev) => answer("approve", ev.currentTarget));
  buttons.querySelector(".always")?.addEventListener("click", (ev) => answer("always", ev.currentTarget));
  buttons.querySelector(".deny").addEventListener("click", (ev) => answer("deny", ev.currentTarget));

  if (!firstSeen.has(a.id)) firstSeen.set(a.id, Date.now());
  if (!cards.has(a.id)) cards.set(a.id, new Set());
  cards.get(a.id).add(card);
  if (answered.has(a.id)) markResolved(card, answered.get(a.id));
  return card;
}

function markResolved(card, label) {
  card.classList.add("resolved");
  const buttons = card.querySelector(".approval-buttons");
  if (buttons) buttons.remove();
  const status = card.querySelector(".approval-status");
  if (status) status.textContent = label;
  card.classList.toggle("denied", /Denied/.test(label));
}

// Marks an approval answered everywhere it is shown (also used when a tool_end or a
// refreshed list says it is no longer waiting).
export function resolve(id, label) {
  answered.set(id, label);
  for (const card of cards.get(id) || []) markResolved(card, label);
  emit("approvals-changed");
}

// Cards whose approval disappeared from GET /api/approvals were answered elsewhere.
// `askedAt` is when that GET started: an approval first seen later may simply not
// have existed yet when the list was made.
export function reconcile(pendingIds, askedAt) {
  for (const [id, set] of cards) {
    if (answered.has(id) || pendingIds.has(id)) continue;
    if ((firstSeen.get(id) || 0) >= askedAt) continue;
    for (const card of set) if (!card.isConnected) set.delete(card);
    if (set.size) resolve(id, "Answered elsewhere");
  }
}
