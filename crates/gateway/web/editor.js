// The workspace file editor. A monospace textarea (#editor) is always there and
// always holds the current text; CodeMirror 5 is loaded lazily the first time a file
// opens and, when it loads, edits on top of it (cm.save() keeps #editor in step).
// Preference "plain" (toggle in the editor header) keeps the textarea only.

import { api } from "./api.js";
import { $, el, toast, confirmDialog, store } from "./util.js";
import { state, emit } from "./state.js";

const CM_FILES = ["/vendor/codemirror/codemirror.js", "/vendor/codemirror/mode/markdown.js", "/vendor/codemirror/mode/yaml.js"];

const ed = {
  path: null,
  original: "",
  readOnly: true,
  cm: null,
  cmLoading: null,
  saving: false,
};

function textarea() {
  return $("#editor");
}

export function getValue() {
  return ed.cm ? ed.cm.getValue() : textarea().value;
}

export function setValue(text) {
  if (ed.cm) ed.cm.setValue(text);
  else textarea().value = text;
  onEdit();
}

export function isDirty() {
  return !!ed.path && getValue() !== ed.original;
}

function onEdit() {
  if (ed.cm) ed.cm.save();
  const dirty = isDirty();
  $("#editor-dirty").hidden = !dirty;
  $("#save-file").disabled = !ed.path || ed.readOnly || !dirty || ed.saving;
  const item = ed.path ? document.querySelector(`.file-item[data-path="${CSS.escape(ed.path)}"]`) : null;
  if (item) item.classList.toggle("dirty", dirty);
}

function modeFor(path) {
  if (/\.ya?ml$/i.test(path)) return "yaml";
  if (/\.(md|markdown|txt)$/i.test(path)) return "markdown";
  return null;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.async = false;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.appendChild(s);
  });
}

function loadCodeMirror() {
  if (ed.cmLoading) return ed.cmLoading;
  const css = document.createElement("link");
  css.rel = "stylesheet";
  css.href = "/vendor/codemirror/codemirror.css";
  document.head.appendChild(css);
  ed.cmLoading = CM_FILES.reduce((p, src) => p.then(() => loadScript(src)), Promise.resolve()).then(() => window.CodeMirror);
  return ed.cmLoading;
}

function wantCodeMirror() {
  return store.get("nanocrab.editor") !== "plain";
}

async function attachCodeMirror() {
  if (ed.cm || !wantCodeMirror()) return;
  let CM;
  try {
    CM = await loadCodeMirror();
  } catch {
    return; // The textarea keeps working.
  }
  if (!CM || ed.cm || !wantCodeMirror()) return;
  const ta = textarea();
  ed.cm = CM.fromTextArea(ta, {
    lineNumbers: true,
    lineWrapping: true,
    mode: ed.path ? modeFor(ed.path) : "markdown",
    readOnly: ed.readOnly ? "nocursor" : false,
    theme: "nanocrab",
    indentUnit: 2,
    tabSize: 2,
    viewportMargin: 200,
    extraKeys: { "Ctrl-S": () => save(), "Cmd-S": () => save(), Tab: false, "Shift-Tab": false },
  });
  ed.cm.getWrapperElement().setAttribute("aria-label", "File editor");
  ed.cm.on("change", onEdit);
  $("#editor-mode").textContent = "Plain";
  refresh();
}

function detachCodeMirror() {
  if (!ed.cm) return;
  ed.cm.save();
  ed.cm.toTextArea();
  ed.cm = null;
  $("#editor-mode").textContent = "Rich";
}

export function refresh() {
  if (ed.cm) ed.cm.refresh();
}

function setReadOnly(ro) {
  ed.readOnly = ro;
  textarea().readOnly = ro;
  textarea().disabled = !ed.path;
  if (ed.cm) ed.cm.setOption("readOnly", ro ? "nocursor" : false);
}

export async function openFile(path) {
  if (ed.path === path) return;
  if (isDirty()) {
    const ok = await confirmDialog("Discard unsaved changes?", `${ed.path} has changes that are not saved.`, "Discard");
    if (!ok) return;
  }
  $("#editor-status").textContent = "Loading…";
  let f;
  try {
    f = await api.readFile(path, state.agent);
  } catch (e) {
    $("#editor-status").textContent = "";
    toast(e.status === 403 ? `${path} is outside the workspace.` : `Could not open ${path}: ${e.message}`, "error");
    return;
  }
  ed.path = f.path || path;
  ed.original = f.content || "";
  const ta = textarea();
  ta.disabled = false;
  if (ed.cm) {
    ed.cm.setOption("mode", modeFor(ed.path));
    ed.cm.setValue(ed.original);
    ed.cm.clearHistory();
  } else ta.value = ed.original;
  setReadOnly(!!f.protected);
  $("#editor-path").textContent = ed.path;
  $("#editor-path").title = ed.path;
  const note = $("#editor-note");
  note.hidden = !f.protected;
  note.textContent = f.protected ? "This file is protected: the agent's tools cannot change it and neither can the page. It is shown read-only." : "";
  $("#editor-status").textContent = "";
  for (const item of document.querySelectorAll(".file-item")) {
    const active = item.dataset.path === ed.path;
    item.classList.toggle("active", active);
    if (active) item.setAttribute("aria-current", "true");
    else item.removeAttribute("aria-current");
  }
  onEdit();
  emit("file-opened", ed.path);
  attachCodeMirror();
}

export async function save() {
  if (!ed.path || ed.readOnly || ed.saving) return;
  const content = getValue();
  ed.saving = true;
  onEdit();
  $("#editor-status").textContent = "Saving…";
  try {
    const r = await api.writeFile(ed.path, content, state.agent);
    ed.original = content;
    $("#editor-status").textContent = r && r.reindexed ? "Saved · memory re-indexed" : "Saved";
    emit("file-saved", ed.path);
  } catch (e) {
    $("#editor-status").textContent = "";
    toast(e.status === 403 ? `${ed.path} is protected or outside the workspace; nothing was written.` : `Could not save: ${e.message}`, "error");
  } finally {
    ed.saving = false;
    onEdit();
  }
}

export function currentPath() {
  return ed.path;
}

export function initEditor() {
  const ta = textarea();
  ta.addEventListener("input", onEdit);
  const head = $(".editor-head");
  const modeBtn = el("button#editor-mode.small", { type: "button", "aria-label": "Switch between the plain and the highlighting editor", text: wantCodeMirror() ? "Plain" : "Rich" });
  head.insertBefore(modeBtn, $("#save-file"));
  modeBtn.addEventListener("click", () => {
    if (ed.cm || (ed.cmLoading && wantCodeMirror())) {
      store.set("nanocrab.editor", "plain");
      detachCodeMirror();
      modeBtn.textContent = "Rich";
    } else {
      store.set("nanocrab.editor", null);
      modeBtn.textContent = "Plain";
      if (ed.path) attachCodeMirror();
    }
  });
  $("#save-file").addEventListener("click", save);
  document.addEventListener("keydown", (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && ev.key.toLowerCase() === "s") {
      const inEditor = ev.target === ta || (ev.target.closest && ev.target.closest("#editor-host"));
      if (inEditor) {
        ev.preventDefault();
        save();
      }
    }
  });
  window.addEventListener("beforeunload", (ev) => {
    if (isDirty()) {
      ev.preventDefault();
      ev.returnValue = "";
    }
  });
  // For browser tests and the console: the editor's text whichever editor is shown.
  window.nanocrabEditor = { getValue, setValue, save, openFile, currentPath };
}
