// The sessions sidebar: list, new, inline rename, delete, running dots, channel
// badges for sessions from other channels.

import { api } from "./api.js";
import { $, el, clear, toast, fmtTime, confirmDialog, debounce } from "./util.js";
import { state, on, emit, sessionById } from "./state.js";
import { showSession } from "./chat.js";
import { icon } from "./icons.js";

let renaming = null;
let pendingRender = false;

export async function refreshSessions() {
  try {
    const r = await api.sessions();
    state.sessions = (r && r.data) || [];
  } catch (e) {
    toast(`Could not load sessions: ${e.message}`, "error");
    return;
  }
  render();
  emit("sessions-updated");
}

const refreshSoon = debounce(refreshSessions, 300);

function displayTitle(s) {
  return s.title && s.title.trim() ? s.title : "New chat";
}

export function render() {
  if (renaming) {
    pendingRender = true;
    return;
  }
  pendingRender = false;
  const list = $("#session-list");
  clear(list);
  if (!state.sessions.length) {
    list.append(el("li.empty", { text: "No conversations yet. Say hello!" }));
    return;
  }
  for (const s of state.sessions) {
    const current = s.id === state.current;
    const open = el(
      "button.session-open",
      { type: "button", "aria-label": `Open ${displayTitle(s)}`, "aria-current": current ? "true" : false },
      el(
        "span.session-line",
        null,
        s.running ? el("span.running-dot", { role: "img", "aria-label": "running", title: "A turn is running" }) : null,
        el("span.session-title", { text: displayTitle(s) }),
      ),
      el(
        "span.session-sub",
        null,
        s.channel && s.channel !== "web" ? el("span.channel-badge", { dataset: { channel: s.channel }, text: s.channel }) : null,
        s.readOnly && !state.opened.has(s.id) ? el("span.ro-badge", { title: "Read-only until opened", text: "read-only" }) : null,
        el("span.session-time", { text: `${fmtTime(s.updatedAt || s.createdAt)}${typeof s.messages === "number" ? ` · ${s.messages} msg` : ""}` }),
      ),
    );
    const actions = el(
      "span.session-actions",
      null,
      el("button.rename-session.icon-btn.small", { type: "button", "aria-label": `Rename ${displayTitle(s)}`, title: "Rename" }, icon("pencil", 14)),
      el("button.delete-session.icon-btn.small", { type: "button", "aria-label": `Delete ${displayTitle(s)}`, title: "Delete" }, icon("trash", 14)),
    );
    list.append(el("li.session-item", { dataset: { id: s.id }, className: current ? "session-item current" : "session-item" }, open, actions));
  }
}

function startRename(item, s) {
  if (renaming) return;
  renaming = s.id;
  // The input replaces the whole open button: an input inside a button would also
  // "click" the button (and reopen the session) on Enter.
  const openBtn = item.querySelector(".session-open");
  const input = el("input.rename-input", { type: "text", value: s.title || "", "aria-label": "New title", maxlength: 200 });
  openBtn.replaceWith(input);
  input.focus();
  input.select();
  let finished = false;
  const end = async (save) => {
    if (finished) return;
    finished = true;
    const title = input.value.trim();
    if (save && !title && input.dataset.touched) {
      // An emptied title asks the gateway to write one from the conversation.
      try {
        const r = await api.generateTitle(s.id);
        if (r && r.title) s.title = r.title;
        emit("sessions-updated");
      } catch (e) {
        toast(`Could not generate a title: ${e.message}`, "error");
      }
    } else if (save && title && title !== s.title) {
      try {
        const updated = await api.renameSession(s.id, title);
        s.title = (updated && updated.title) || title;
        emit("sessions-updated");
      } catch (e) {
        toast(`Could not rename: ${e.message}`, "error");
      }
    }
    renaming = null;
    render();
    if (pendingRender) render();
  };
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      ev.preventDefault();
      end(true);
    } else if (ev.key === "Escape") {
      ev.preventDefault();
      end(false);
    }
  });
  input.addEventListener("input", () => (input.dataset.touched = "1"));
  input.title = "Enter saves, Escape cancels; an empty title is generated from the conversation";
  input.addEventListener("blur", () => end(true));
  input.addEventListener("click", (ev) => ev.stopPropagation());
}

async function remove(s) {
  const ok = await confirmDialog(
    "Delete this session?",
    `“${displayTitle(s)}” leaves the list. Its transcript is archived, not destroyed.`,
    "Delete",
  );
  if (!ok) return;
  try {
    await api.deleteSession(s.id);
    state.sessions = state.sessions.filter((x) => x.id !== s.id);
    render();
    if (state.current === s.id) showSession(null);
    toast("Session deleted.", "info", 2000);
  } catch (e) {
    toast(`Could not delete: ${e.message}`, "error");
  }
  refreshSoon();
}

export async function newSession() {
  const btn = $("#new-session");
  btn.disabled = true;
  try {
    const s = await api.createSession(state.agent);
    if (s && s.id) {
      state.sessions = [s, ...state.sessions.filter((x) => x.id !== s.id)];
      await showSession(s.id);
      render();
    }
  } catch (e) {
    toast(`Could not create a session: ${e.message}`, "error");
  } finally {
    btn.disabled = false;
    emit("close-drawers");
    $("#message-input").focus();
  }
}

export function initSessions() {
  $("#new-session").addEventListener("click", newSession);
  $("#session-list").addEventListener("click", (ev) => {
    const item = ev.target.closest(".session-item");
    if (!item) return;
    const s = sessionById(item.dataset.id);
    if (!s) return;
    if (ev.target.closest(".rename-session")) startRename(item, s);
    else if (ev.target.closest(".delete-session")) remove(s);
    else if (ev.target.closest(".session-open")) {
      showSession(s.id).then(render);
      render();
      emit("close-drawers");
    }
  });
  $("#session-list").addEventListener("dblclick", (ev) => {
    const item = ev.target.closest(".session-item");
    if (item && ev.target.closest(".session-title")) startRename(item, sessionById(item.dataset.id));
  });
  on("sessions-dirty", refreshSoon);
  on("sessions-render", render);
  on("session-changed", render);
}
