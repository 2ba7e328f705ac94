// Entry point: sign-in, theme, drawers on narrow screens, live events, and the
// wiring of the sidebar, the chat and the inspector.

import { api, setCsrf } from "./api.js";
import { $, el, toast, store, debounce } from "./util.js";
import { state, on, emit } from "./state.js";
import { initChat, showSession, sessionFromHash, applyLiveTurn, applyLiveMessage } from "./chat.js";
import { initSessions, refreshSessions } from "./sessions.js";
import { initInspector, loadFiles } from "./inspector.js";
import { initEditor, refresh as refreshEditor } from "./editor.js";
import { icon, fillIcons } from "./icons.js";

// ---------- theme ----------

function systemTheme() {
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function effectiveTheme() {
  return document.documentElement.getAttribute("data-theme") || systemTheme();
}

function applyTheme(theme) {
  document.documentElement.setAttribute("data-theme", theme);
  $("#hljs-light").media = theme === "light" ? "all" : "not all";
  $("#hljs-dark").media = theme === "dark" ? "all" : "not all";
  const btn = $("#theme-toggle");
  btn.replaceChildren(icon(theme === "dark" ? "sun" : "moon", 18));
  btn.setAttribute("aria-label", theme === "dark" ? "Switch to light theme" : "Switch to dark theme");
  btn.title = btn.getAttribute("aria-label");
}

function initTheme() {
  applyTheme(effectiveTheme());
  $("#theme-toggle").addEventListener("click", () => {
    const next = effectiveTheme() === "dark" ? "light" : "dark";
    store.set("nanocrab.theme", next);
    applyTheme(next);
  });
  if (window.matchMedia) {
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      if (!store.get("nanocrab.theme")) applyTheme(systemTheme());
    });
  }
}

// ---------- layout: drawers on a phone, inspector toggle on a desktop ----------

const narrow = window.matchMedia("(max-width: 700px)");

function setDrawer(which) {
  const app = $("#app");
  app.classList.toggle("sidebar-open", which === "sidebar");
  app.classList.toggle("inspector-open", which === "inspector");
  $("#drawer-backdrop").hidden = !which;
  $("#sidebar-toggle").setAttribute("aria-expanded", String(which === "sidebar"));
  if (narrow.matches) $("#inspector-toggle").setAttribute("aria-expanded", String(which === "inspector"));
}

function initLayout() {
  $("#sidebar-toggle").addEventListener("click", () => setDrawer($("#app").classList.contains("sidebar-open") ? null : "sidebar"));
  $("#inspector-toggle").addEventListener("click", () => {
    if (narrow.matches) {
      setDrawer($("#app").classList.contains("inspector-open") ? null : "inspector");
      return;
    }
    const hidden = $("#app").classList.toggle("inspector-hidden");
    store.set("nanocrab.inspector", hidden ? "hidden" : null);
    $("#inspector-toggle").setAttribute("aria-expanded", String(!hidden));
  });
  if (store.get("nanocrab.inspector") === "hidden") {
    $("#app").classList.add("inspector-hidden");
    $("#inspector-toggle").setAttribute("aria-expanded", "false");
  }
  initResize();
  $("#drawer-backdrop").addEventListener("click", () => setDrawer(null));
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && ($("#app").classList.contains("sidebar-open") || $("#app").classList.contains("inspector-open"))) setDrawer(null);
  });
  narrow.addEventListener("change", () => setDrawer(null));
  on("close-drawers", () => {
    if (narrow.matches) setDrawer(null);
  });
  on("file-opened", () => {
    // On a phone the editor lives in the inspector drawer; keep it open.
  });
}

// The inspector's width: drag its left edge (or arrow keys on it); remembered.
function initResize() {
  const handle = $("#inspector-resize");
  const layout = $(".layout");
  const clamp = (w) => Math.round(Math.max(300, Math.min(w, window.innerWidth - 264 - 380)));
  const set = (w, save) => {
    if (w === null) {
      layout.style.removeProperty("--inspector-width");
      store.set("nanocrab.inspectorWidth", null);
    } else {
      layout.style.setProperty("--inspector-width", `${clamp(w)}px`);
      if (save) store.set("nanocrab.inspectorWidth", String(clamp(w)));
    }
    refreshEditor();
  };
  const saved = Number(store.get("nanocrab.inspectorWidth"));
  if (saved > 0) set(saved, false);
  let dragging = false;
  handle.addEventListener("pointerdown", (ev) => {
    dragging = true;
    handle.setPointerCapture(ev.pointerId);
    handle.classList.add("dragging");
    document.body.classList.add("resizing");
    ev.preventDefault();
  });
  handle.addEventListener("pointermove", (ev) => {
    if (dragging) set(layout.getBoundingClientRect().right - ev.clientX, false);
  });
  const end = (ev) => {
    if (!dragging) return;
    dragging = false;
    handle.classList.remove("dragging");
    document.body.classList.remove("resizing");
    set(layout.getBoundingClientRect().right - ev.clientX, true);
  };
  handle.addEventListener("pointerup", end);
  handle.addEventListener("pointercancel", end);
  handle.addEventListener("dblclick", () => set(null));
  handle.addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight") return;
    ev.preventDefault();
    const now = $("#inspector").getBoundingClientRect().width;
    set(now + (ev.key === "ArrowLeft" ? 24 : -24), true);
  });
}

// ---------- live events ----------

let events = null;

function connectEvents() {
  if (events || typeof EventSource === "undefined") return;
  const status = $("#conn-status");
  events = new EventSource("/api/events", { withCredentials: true });
  const parse = (ev) => {
    try {
      return JSON.parse(ev.data || "{}");
    } catch {
      return {};
    }
  };
  const refresh = debounce(refreshSessions, 250);
  events.addEventListener("open", () => {
    status.textContent = "● live";
    status.className = "conn-status ok";
    status.title = "Live updates connected";
  });
  events.addEventListener("error", () => {
    status.textContent = "● offline";
    status.className = "conn-status bad";
    status.title = "Live updates disconnected; retrying";
  });
  events.addEventListener("sessions", refresh);
  events.addEventListener("turn", (ev) => {
    const d = parse(ev);
    applyLiveTurn(d.sessionId, d.event || {});
    const t = d.event && d.event.type;
    if (t === "done" || t === "session" || t === "title") refresh();
  });
  events.addEventListener("message", (ev) => applyLiveMessage(parse(ev)));
  events.addEventListener("approval", () => emit("approval-event"));
}

// ---------- sign-in and start ----------

function show(view) {
  $("#boot").hidden = true;
  $("#signin-view").hidden = view !== "signin";
  $("#app").hidden = view !== "app";
}

function showSignin(message) {
  show("signin");
  const err = $("#signin-error");
  err.hidden = !message;
  err.textContent = message || "";
  $("#signin-token").focus();
}

function initSignin() {
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const input = $("#signin-token");
    const token = input.value;
    if (!token) return;
    const btn = $("#signin");
    btn.disabled = true;
    try {
      const r = await api.login(token);
      input.value = "";
      if (r && r.csrf) setCsrf(r.csrf);
      usedToken = true;
      await boot();
    } catch (e) {
      showSignin(e.status === 401 ? "That token is not right." : `Could not sign in: ${e.message}`);
    } finally {
      btn.disabled = false;
    }
  });
}

let started = false;
// Set when this page signed in with the token: only then is there a cookie to drop.
let usedToken = false;

async function start(me) {
  state.me = me;
  setCsrf(me.csrf);
  state.agent = me.defaultAgent || (me.agents && me.agents[0]) || "main";
  show("app");
  $("#logout").hidden = !(me.needsToken || usedToken);
  const agents = Array.isArray(me.agents) ? me.agents : [];
  if (agents.length > 1) {
    const sel = $("#agent-select");
    for (const a of agents) sel.append(el("option", { value: a, text: a }));
    sel.value = state.agent;
    $("#agent-picker").hidden = false;
    sel.addEventListener("change", () => {
      state.agent = sel.value;
      emit("agent-changed", state.agent);
    });
  }
  if (started) return;
  started = true;
  initSessions();
  initChat();
  initEditor();
  initInspector();
  await refreshSessions();
  await showSession(sessionFromHash());
  connectEvents();
  $("#message-input").focus();
}

async function boot() {
  let me;
  try {
    me = await api.me();
  } catch (e) {
    $("#boot").textContent = `Cannot reach the gateway: ${e.message}`;
    return;
  }
  // api.me() turns a refusal into { signedIn: false, status }; anything else is a 200.
  if (me && me.signedIn !== false && !me.status) return start(me);
  if (me && me.needsToken) return showSignin("");
  $("#boot").textContent = "The gateway refused the page. Reload to try again.";
}

function init() {
  // A cookie that expired (or a gateway restarted with a new token) sends the user
  // back to the sign-in form instead of a stream of failing requests.
  const recheck = debounce(async () => {
    if ($("#app").hidden) return;
    const me = await api.me().catch(() => null);
    if (me && me.signedIn === false && me.needsToken) showSignin("Your sign-in has expired. Enter the token again.");
  }, 500);
  window.addEventListener("nanocrab:unauthorized", recheck);
  fillIcons();
  initTheme();
  initLayout();
  initSignin();
  $("#logout").addEventListener("click", async () => {
    try {
      await api.logout();
    } catch {
      // Signed out or not, the sign-in view is where the user goes next.
    }
    location.reload();
  });
  window.addEventListener("hashchange", () => {
    const id = sessionFromHash();
    if (started && id !== state.current) showSession(id);
  });
  boot();
}

export { toast, loadFiles };

init();
