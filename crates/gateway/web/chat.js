// The chat pane: history, the streamed answer with its thought chain, approvals
// inline, the composer (text, images, Enter to send), stop, compress and RAG.

import { api, chat as chatStream } from "./api.js";
import { $, el, clear, toast, pretty, fmtTokens, fmtNumber, fmtDateTime, confirmDialog } from "./util.js";
import { renderMarkdown } from "./markdown.js";
import { approvalCard, reconcile } from "./approvals.js";
import { state, on, emit, sessionById } from "./state.js";

const OUTPUT_PREVIEW = 2000;
const NEW_KEY = "\u0000new";
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const MAX_IMAGE = 5 * 1024 * 1024;
const MAX_IMAGES = 4;
// Events from /api/events for a session this page is itself streaming are echoes.
const ECHO_GRACE_MS = 3000;

// One view (a .messages element) per session kept while it is shown or streaming.
const views = new Map();
const recentlyEnded = new Map();
let attachments = [];

function brief(input) {
  if (input === null || input === undefined) return "";
  if (typeof input === "string") return input.slice(0, 90);
  if (typeof input === "object") {
    for (const v of Object.values(input)) {
      if (typeof v === "string" && v.trim()) return v.replace(/\s+/g, " ").slice(0, 90);
    }
  }
  return "";
}

function outputBlock(output, isError) {
  const full = pretty(output === undefined || output === null ? "" : output);
  const pre = el(isError ? "pre.tool-output.error" : "pre.tool-output");
  if (full.length <= OUTPUT_PREVIEW) {
    pre.textContent = full || "(no output)";
    return pre;
  }
  const short = `${full.slice(0, OUTPUT_PREVIEW)}…`;
  pre.textContent = short;
  const label = `Show all (${fmtNumber(full.length)} characters)`;
  const btn = el("button.show-all.link", { type: "button", text: label, "aria-expanded": "false" });
  btn.addEventListener("click", () => {
    const expand = btn.getAttribute("aria-expanded") !== "true";
    pre.textContent = expand ? full : short;
    btn.textContent = expand ? "Show less" : label;
    btn.setAttribute("aria-expanded", String(expand));
  });
  return el("div.output-wrap", null, pre, btn);
}

// One assistant answer: text segments, and the collapsible thought chain holding
// retrieval hits, reasoning, tool calls and the model calls with their tokens.
class AnswerView {
  constructor(view, live) {
    this.view = view;
    this.live = live;
    this.chain = el("details.thought-chain", { hidden: true });
    this.chainCount = el("span.chain-count");
    this.chainState = el("span.chain-state");
    this.chain.append(
      el("summary", null, el("span.chain-title", { text: "Thought chain" }), this.chainCount, this.chainState),
    );
    this.chainBody = el("div.chain-body");
    this.chain.append(this.chainBody);
    this.content = el("div.answer-content");
    this.typing = el("div.typing", { "aria-label": "Working", hidden: true }, el("span"), el("span"), el("span"));
    this.meta = el("div.answer-meta", { hidden: true });
    this.el = el(
      "article.message.assistant",
      { "aria-label": "Assistant answer" },
      el("div.avatar", { "aria-hidden": "true" }, el("img", { src: "/favicon.svg", alt: "", width: 20, height: 20 })),
      el("div.bubble", null, this.chain, this.content, this.typing, this.meta),
    );
    this.segment = null;
    this.segments = [];
    this.tools = new Map();
    this.reasoningEl = null;
    this.hits = 0;
    this.models = [];
    this.calls = 0;
    this.totals = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
    this.doneUsage = null;
    this.waiting = null;
    this.renderQueued = false;
    this.finished = false;
  }

  pending() {
    this.typing.hidden = false;
    this.el.setAttribute("aria-busy", "true");
  }

  changed() {
    if (this.view) scrollDown(this.view);
  }

  step(node) {
    this.reasoningEl = null;
    this.chainBody.append(node);
    this.chain.hidden = false;
    this.updateSummary();
  }

  addText(text) {
    if (!text) return;
    if (!this.segment) {
      this.segment = { raw: "", el: el("div.segment.markdown"), dirty: true };
      this.segments.push(this.segment);
      this.content.append(this.segment.el);
    }
    this.segment.raw += text;
    this.segment.dirty = true;
    if (this.finished) this.renderSegments(true);
    else this.queueRender();
  }

  queueRender() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const run = () => {
      this.renderQueued = false;
      this.renderSegments(false);
      this.changed();
    };
    // A hidden tab gets no animation frames; the timer keeps the text current there.
    if (document.hidden) setTimeout(run, 200);
    else requestAnimationFrame(run);
  }

  renderSegments(highlight) {
    for (const s of this.segments) {
      if (!s.dirty && !highlight) continue;
      renderMarkdown(s.el, s.raw, highlight);
      s.dirty = false;
    }
  }

  segmentBreak() {
    this.segment = null;
  }

  addReasoning(text) {
    if (!text) return;
    if (!this.reasoningEl) {
      this.reasoningEl = el("div.reasoning.step", null, el("div.step-label", { text: "Reasoning" }), el("div.reasoning-text"));
      this.chainBody.append(this.reasoningEl);
      this.chain.hidden = false;
    }
    this.reasoningEl.lastChild.textContent += text;
    this.updateSummary();
  }

  toolStart(callId, tool, input) {
    this.segment = null;
    const id = callId || `call-${this.tools.size}`;
    if (this.tools.has(id)) return this.tools.get(id);
    const name = tool || "tool";
    const status = el("span.tool-status.running", { role: "img", "aria-label": "running" });
    const stateText = el("span.tool-state", { text: this.live ? "running…" : "" });
    const node = el(
      "div.tool-call.step",
      { dataset: { tool: name, callId: id } },
      el("div.tool-head", null, status, el("span.tool-name", { text: name }), el("span.tool-brief", { text: brief(input) }), stateText),
      el(
        "details.tool-section.tool-args",
        { open: true },
        el("summary.step-label", { text: "Arguments" }),
        el("pre.tool-input", { text: input === undefined ? "" : pretty(input) }),
      ),
      el("div.tool-section.tool-result", { hidden: true }, el("div.step-label", { text: "Result" })),
    );
    const rec = { node, status, stateText, name, done: false };
    this.tools.set(id, rec);
    this.step(node);
    if (this.live) this.chain.open = true;
    return rec;
  }

  toolEnd(callId, tool, output, isError) {
    let rec = callId ? this.tools.get(callId) : null;
    if (!rec && !callId) rec = [...this.tools.values()].find((r) => !r.done && (!tool || r.name === tool)) || null;
    if (!rec) rec = this.toolStart(callId, tool, undefined);
    if (rec.done) return;
    rec.done = true;
    rec.status.className = `tool-status ${isError ? "error" : "ok"}`;
    rec.status.setAttribute("aria-label", isError ? "failed" : "done");
    rec.stateText.textContent = isError ? "error" : "";
    rec.node.classList.toggle("is-error", !!isError);
    const section = rec.node.querySelector(".tool-result");
    section.hidden = false;
    section.append(outputBlock(output, isError));
    if (this.waiting) {
      this.waiting = null;
    }
    this.updateSummary();
  }

  retrieval(data) {
    const results = Array.isArray(data.results) ? data.results : [];
    this.hits += results.length;
    const node = el(
      "div.retrieval.step",
      null,
      el("div.step-label", { text: `Retrieval · ${results.length} ${results.length === 1 ? "hit" : "hits"}` }),
      data.query ? el("div.retrieval-query", { text: data.query }) : null,
      el(
        "ul.retrieval-hits",
        null,
        results.map((r) =>
          el(
            "li",
            null,
            el("span.hit-path.mono", { text: `${r.path || "?"}${r.startLine ? `:${r.startLine}${r.endLine ? `–${r.endLine}` : ""}` : ""}` }),
            typeof r.score === "number" ? el("span.hit-score", { text: r.score.toFixed(3) }) : null,
            r.snippet || r.text ? el("div.hit-snippet", { text: String(r.snippet || r.text).slice(0, 400) }) : null,
          ),
        ),
      ),
    );
    this.step(node);
  }

  usage(data) {
    this.calls += 1;
    if (data.model && !this.models.includes(data.model)) this.models.push(data.model);
    for (const k of Object.keys(this.totals)) this.totals[k] += Number(data[k] || 0);
    const parts = [data.model || "model", `${fmtTokens(data.inputTokens || 0)} in`, `${fmtTokens(data.outputTokens || 0)} out`];
    if (data.cacheReadTokens) parts.push(`${fmtTokens(data.cacheReadTokens)} cache read`);
    if (data.cacheWriteTokens) parts.push(`${fmtTokens(data.cacheWriteTokens)} cache write`);
    this.step(el("div.usage-line.step", null, el("span.step-label", { text: `Model call ${this.calls}` }), el("span.mono", { text: parts.join(" · ") })));
    this.updateMeta();
  }

  addModel(model) {
    if (model && !this.models.includes(model)) this.models.push(model);
    this.updateSummary();
    this.updateMeta();
  }

  notice(text, kind = "notice") {
    this.content.append(el(`div.${kind}`, { text }));
  }

  approval(data) {
    this.segment = null;
    this.typing.hidden = true;
    this.waiting = data.tool || "approval";
    this.content.append(approvalCard(data));
    if (this.view && data.id) this.view.approvalIds.add(data.id);
    this.updateSummary();
  }

  error(message) {
    this.content.append(el("div.error-line", { role: "alert", text: message }));
    this.finish();
  }

  done(data) {
    if (data.content && !this.segments.some((s) => s.raw)) this.addText(data.content);
    if (data.usage && typeof data.usage === "object") this.doneUsage = data.usage;
    if (data.interrupted) this.notice("Stopped. What was said so far is kept.");
    this.finish();
  }

  finish() {
    if (this.finished) return;
    this.finished = true;
    this.typing.hidden = true;
    this.el.removeAttribute("aria-busy");
    this.waiting = null;
    this.renderSegments(true);
    for (const rec of this.tools.values()) {
      if (rec.done) continue;
      rec.status.className = "tool-status unknown";
      rec.status.setAttribute("aria-label", "no result");
      rec.stateText.textContent = "no result";
    }
    if (!this.segments.length && !this.content.childNodes.length && this.chain.hidden) {
      this.notice("(no answer)");
    }
    this.updateSummary();
    this.updateMeta();
  }

  updateSummary() {
    const parts = [];
    const n = this.tools.size;
    if (n) parts.push(`${n} tool ${n === 1 ? "call" : "calls"}`);
    if (this.hits) parts.push(`${this.hits} retrieval ${this.hits === 1 ? "hit" : "hits"}`);
    if (this.chainBody.querySelector(".reasoning")) parts.push("reasoning");
    if (this.models.length) parts.push(this.models.join(", "));
    this.chainCount.textContent = parts.length ? ` · ${parts.join(" · ")}` : "";
    let st = "";
    if (!this.finished) {
      const running = [...this.tools.values()].find((r) => !r.done);
      if (this.waiting) st = `waiting for approval`;
      else if (running) st = `running ${running.name}…`;
    }
    this.chainState.textContent = st;
    this.chainState.hidden = !st;
  }

  updateMeta() {
    const u = this.doneUsage || (this.calls ? this.totals : null);
    if (!u && !this.models.length) return;
    const bits = [];
    if (this.models.length) bits.push(this.models.join(", "));
    if (u) {
      bits.push(`${fmtNumber(u.inputTokens || 0)} in`);
      bits.push(`${fmtNumber(u.outputTokens || 0)} out`);
      if (u.cacheReadTokens) bits.push(`${fmtNumber(u.cacheReadTokens)} cached`);
    }
    this.meta.textContent = bits.join(" · ");
    this.meta.hidden = false;
  }

  apply(name, d) {
    d = d || {};
    switch (name) {
      case "retrieval": this.retrieval(d); break;
      case "token": this.typing.hidden = true; this.addText(d.content); break;
      case "reasoning": this.addReasoning(d.content); break;
      case "tool_start": this.toolStart(d.callId, d.tool, d.input); break;
      case "tool_end": this.toolEnd(d.callId, d.tool, d.output, d.isError); break;
      case "new_response": this.segmentBreak(); break;
      case "usage": this.usage(d); break;
      case "approval": this.approval(d); break;
      case "compaction": this.notice(`Conversation compacted${d.messages !== undefined ? ` (${d.messages} messages summarized)` : ""}.`); break;
      case "notice": this.notice(d.message || String(d.content || "")); break;
      case "done": this.done(d); break;
      case "error": this.error(errorText(d)); break;
      default: break;
    }
    this.changed();
  }
}

function errorText(d) {
  const e = d.error !== undefined ? d.error : d.message;
  if (!e) return "The run failed.";
  if (typeof e === "string") return e;
  return e.message || JSON.stringify(e);
}

// ---------- views ----------

function makeView(key) {
  const node = el("div.messages", { role: "log", "aria-label": "Conversation" });
  const v = { key, el: node, loaded: false, stream: null, live: null, autoScroll: true, approvalIds: new Set(), loadSeq: 0 };
  node.addEventListener("scroll", () => {
    v.autoScroll = node.scrollHeight - node.scrollTop - node.clientHeight < 80;
  });
  return v;
}

function scrollDown(v, force = false) {
  if (!force && !v.autoScroll) return;
  requestAnimationFrame(() => {
    v.el.scrollTop = v.el.scrollHeight;
  });
}

function viewKey(id) {
  return id === null || id === undefined ? NEW_KEY : id;
}

function currentView() {
  return views.get(viewKey(state.current)) || null;
}

function welcome(v) {
  clear(v.el);
  v.el.append(
    el(
      "div.welcome",
      null,
      el("img", { src: "/favicon.svg", alt: "", width: 64, height: 64 }),
      el("h2", { text: "What can I do for you?" }),
      el("p.muted", { text: "Every tool call, retrieval hit and token is shown. Files on the right are the agent's memory and skills: edit them in place." }),
    ),
  );
}

function normalizeContent(content) {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content : [];
}

function userMessage(blocks, timestamp) {
  const bubble = el("div.bubble");
  const images = blocks.filter((b) => b.type === "image");
  if (images.length) {
    bubble.append(
      el(
        "div.user-images",
        null,
        images.map((b) => el("img.user-image", { src: b.url || (b.data ? `data:${b.mediaType};base64,${b.data}` : ""), alt: "Attached image", loading: "lazy" })),
      ),
    );
  }
  const text = blocks.filter((b) => b.type === "text").map((b) => b.text).join("\n");
  if (text) bubble.append(el("div.user-text", { text }));
  const node = el("article.message.user", { "aria-label": "Your message" }, bubble);
  if (timestamp) node.title = fmtDateTime(timestamp);
  return node;
}

function renderHistory(v, h) {
  clear(v.el);
  v.approvalIds.clear();
  const messages = Array.isArray(h.messages) ? h.messages : [];
  const compaction = h.compaction && typeof h.compaction === "object" ? h.compaction : null;
  const banner = compaction
    ? el(
        "details.compaction-banner",
        null,
        el("summary", { text: `Earlier messages were compressed${compaction.through !== undefined ? ` (${compaction.through} summarized)` : ""}` }),
        el("div.compaction-summary", { text: compaction.summary || "" }),
      )
    : null;
  const at = compaction && Number.isInteger(compaction.through) && compaction.through > 0 && compaction.through < messages.length ? compaction.through : 0;
  if (banner && at === 0) v.el.append(banner);
  let answer = null;
  messages.forEach((m, i) => {
    if (banner && at > 0 && i === at) {
      if (answer) answer.finish();
      answer = null;
      v.el.append(banner);
    }
    const blocks = normalizeContent(m.content);
    if (m.role === "assistant") {
      if (!answer) {
        answer = new AnswerView(v, false);
        v.el.append(answer.el);
      }
      for (const b of blocks) {
        if (b.type === "text") answer.addText(b.text);
        else if (b.type === "reasoning") answer.addReasoning(b.text);
        else if (b.type === "toolCall") answer.toolStart(b.id, b.name, b.input);
        else if (b.type === "toolResult") answer.toolEnd(b.callId, null, b.output, b.isError);
        else if (b.type === "image") answer.content.append(el("img.user-image", { src: b.url || "", alt: "Image" }));
      }
      if (m.usage) answer.usage({ model: m.model, ...m.usage });
      else if (m.model) answer.addModel(m.model);
      answer.segmentBreak();
      return;
    }
    const results = blocks.filter((b) => b.type === "toolResult");
    const others = blocks.filter((b) => b.type !== "toolResult");
    for (const r of results) {
      if (!answer) {
        answer = new AnswerView(v, false);
        v.el.append(answer.el);
      }
      answer.toolEnd(r.callId, null, r.output, r.isError);
    }
    if (others.length) {
      if (answer) answer.finish();
      answer = null;
      if (m.role === "user") v.el.append(userMessage(others, m.timestamp));
      else v.el.append(el("div.notice", { text: others.map((b) => b.text || "").join("\n") }));
    }
  });
  if (answer) answer.finish();
  if (!messages.length) welcome(v);
  v.loaded = true;
  scrollDown(v, true);
}

async function loadHistory(v, id) {
  const seq = ++v.loadSeq;
  if (!v.loaded) {
    clear(v.el);
    v.el.append(el("div.loading", { text: "Loading conversation…" }));
  }
  try {
    const h = await api.history(id);
    if (seq !== v.loadSeq || v.stream) return;
    renderHistory(v, h || {});
    if (state.current === id) setChatTitle((sessionById(id) || {}).title || (h && h.title));
  } catch (e) {
    if (seq !== v.loadSeq) return;
    clear(v.el);
    v.el.append(el("div.error-line", { role: "alert", text: e.status === 404 ? "This session no longer exists." : `Could not load the conversation: ${e.message}` }));
    if (e.status === 404) emit("sessions-dirty");
  }
}

// Drops views that are neither shown nor busy, so a later visit reloads fresh history.
function pruneViews() {
  const keep = viewKey(state.current);
  for (const [k, v] of views) {
    if (k !== keep && !v.stream && !v.live) views.delete(k);
  }
}

export async function showSession(id) {
  state.current = id || null;
  const key = viewKey(state.current);
  let v = views.get(key);
  const fresh = !v;
  if (!v) {
    v = makeView(key);
    views.set(key, v);
  }
  pruneViews();
  $("#messages-host").replaceChildren(v.el);
  setHash(state.current);
  updateToolbar();
  updateComposer();
  emit("session-changed", state.current);
  if (state.current === null) {
    if (!v.el.firstChild) welcome(v);
    return;
  }
  if (!v.stream && !v.live) await loadHistory(v, state.current);
  else if (fresh) scrollDown(v, true);
  else scrollDown(v, true);
}

function setHash(id) {
  const want = id ? `#session=${encodeURIComponent(id)}` : "";
  if (location.hash !== want) history.replaceState(null, "", want || location.pathname);
}

export function sessionFromHash() {
  const m = /^#session=(.+)$/.exec(location.hash);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}

// ---------- toolbar ----------

function setChatTitle(title) {
  $("#chat-title").textContent = title || "New chat";
  document.title = title ? `${title} · nanocrab` : "nanocrab";
}

function isReadOnly(id) {
  const s = id ? sessionById(id) : null;
  return !!(s && s.readOnly && !state.opened.has(id));
}

export function updateToolbar() {
  const id = state.current;
  const s = id ? sessionById(id) : null;
  setChatTitle(s ? s.title : null);
  const bar = $("#readonly-bar");
  if (isReadOnly(id)) {
    $("#readonly-text").textContent = `This conversation is from ${s.channel || "another channel"}. It is read-only here until you open it.`;
    bar.hidden = false;
  } else bar.hidden = true;
  $("#compress").disabled = !id;
  const rag = $("#rag-toggle");
  if (!id) {
    rag.disabled = true;
    rag.checked = false;
    $("#token-counter").textContent = "";
    return;
  }
  refreshRag(id);
  refreshTokenCounter(id);
}

async function refreshRag(id) {
  const rag = $("#rag-toggle");
  try {
    const r = await api.ragMode(id);
    if (state.current !== id) return;
    rag.checked = !!r.enabled;
    rag.disabled = r.available === false;
    rag.closest("label").title = r.available === false ? "Retrieval is not available (no memory index)" : `RAG mode (default: ${r.default ? "on" : "off"})`;
  } catch {
    rag.disabled = true;
  }
}

export async function refreshTokenCounter(id = state.current) {
  const counter = $("#token-counter");
  if (!id) return;
  try {
    const t = await api.sessionTokens(id);
    if (state.current !== id) return;
    const total = t.totalTokens || 0;
    const win = t.contextWindow || 0;
    counter.textContent = win ? `${fmtTokens(total)} / ${fmtTokens(win)} tokens` : `${fmtTokens(total)} tokens`;
    counter.title = `System ${fmtNumber(t.systemTokens)} · messages ${fmtNumber(t.messageTokens)} · tools ${fmtNumber(t.toolTokens)}${t.exact ? "" : " (estimate)"}`;
    counter.classList.toggle("warn", !!win && total / win > 0.8);
  } catch {
    counter.textContent = "";
  }
}

// ---------- composer ----------

function streamingHere() {
  const v = currentView();
  return !!(v && v.stream);
}

// A turn of the shown session running elsewhere (another tab, the CLI, a channel).
function runningElsewhere() {
  const s = state.current ? sessionById(state.current) : null;
  return !!(s && s.running && !streamingHere());
}

export function updateComposer() {
  const busy = streamingHere() || runningElsewhere();
  const ro = isReadOnly(state.current);
  $("#send").hidden = busy;
  $("#stop").hidden = !busy;
  const input = $("#message-input");
  input.disabled = ro;
  $("#send").disabled = ro;
  $("#image-input").disabled = ro;
  $("#attach").disabled = ro;
  input.placeholder = ro ? "Read-only: click Open to reply here" : "Message nanocrab…";
}

function autoGrow() {
  const input = $("#message-input");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

function renderAttachments() {
  const host = $("#attachments");
  clear(host);
  host.hidden = attachments.length === 0;
  attachments.forEach((a, i) => {
    const rm = el("button.remove-attachment", { type: "button", "aria-label": `Remove ${a.name}`, text: "×" });
    rm.addEventListener("click", () => {
      URL.revokeObjectURL(a.url);
      attachments.splice(i, 1);
      renderAttachments();
    });
    host.append(el("div.thumb", { title: a.name }, el("img", { src: a.url, alt: a.name }), rm));
  });
}

function readBase64(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => {
      const s = String(r.result || "");
      resolve(s.slice(s.indexOf(",") + 1));
    };
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}

export async function addFiles(files) {
  if (isReadOnly(state.current)) return;
  for (const file of files) {
    if (!IMAGE_TYPES.includes(file.type)) {
      toast(`${file.name || "File"}: only PNG, JPEG, GIF and WebP images can be attached.`, "error");
      continue;
    }
    if (file.size > MAX_IMAGE) {
      toast(`${file.name || "Image"} is larger than 5 MB.`, "error");
      continue;
    }
    if (attachments.length >= MAX_IMAGES) {
      toast(`At most ${MAX_IMAGES} images per message.`, "error");
      break;
    }
    try {
      const data = await readBase64(file);
      attachments.push({ name: file.name || "pasted image", mediaType: file.type, data, url: URL.createObjectURL(file) });
    } catch {
      toast(`Could not read ${file.name || "the image"}.`, "error");
    }
  }
  renderAttachments();
}

export async function send() {
  const input = $("#message-input");
  const text = input.value.trim();
  if (!text && !attachments.length) return;
  if (streamingHere() || runningElsewhere() || isReadOnly(state.current)) return;

  const sessionId = state.current;
  const key = viewKey(sessionId);
  let v = views.get(key);
  if (!v) {
    v = makeView(key);
    views.set(key, v);
    $("#messages-host").replaceChildren(v.el);
  }
  const welcomeEl = v.el.querySelector(".welcome");
  if (welcomeEl) welcomeEl.remove();

  const sent = attachments;
  attachments = [];
  renderAttachments();
  const userEl = userMessage([...sent.map((a) => ({ type: "image", url: a.url })), { type: "text", text }]);
  v.el.append(userEl);
  const answer = new AnswerView(v, true);
  answer.pending();
  v.el.append(answer.el);
  v.autoScroll = true;
  scrollDown(v, true);
  input.value = "";
  autoGrow();

  const stream = { sessionId, view: v, answer, controller: new AbortController(), ended: false };
  v.stream = stream;
  updateComposer();
  schedulePoll(1500);

  const payload = { message: text, agent: state.agent };
  if (sessionId) payload.sessionId = sessionId;
  if (sent.length) payload.images = sent.map((a) => ({ mediaType: a.mediaType, data: a.data }));

  let started = false;
  try {
    await chatStream(
      payload,
      (name, data) => {
        started = true;
        onStreamEvent(stream, name, data);
      },
      stream.controller.signal,
    );
    answer.finish();
  } catch (e) {
    if (e.name === "AbortError") {
      answer.notice("Stopped. What was said so far is kept.");
      answer.finish();
    } else if (!started && e.status) {
      // Refused before anything ran: nothing was said, so the message goes back into
      // the composer instead of staying in the conversation.
      userEl.remove();
      answer.el.remove();
      if (!v.el.firstChild && state.current === null) welcome(v);
      input.value = text;
      attachments = sent;
      renderAttachments();
      autoGrow();
      toast(e.status === 429 ? "The queue is full; try again in a moment." : e.status === 409 ? `Not sent: ${e.message || "a turn is already running"}.` : `Not sent: ${e.message}`, "error");
      answer.finish();
    } else {
      answer.error(e.message || "The request failed.");
    }
  } finally {
    if (attachments !== sent) for (const a of sent) setTimeout(() => URL.revokeObjectURL(a.url), 60000);
    stream.ended = true;
    v.stream = null;
    const ended = stream.sessionId ? sessionById(stream.sessionId) : null;
    if (ended) ended.running = false;
    if (stream.sessionId) recentlyEnded.set(stream.sessionId, Date.now());
    if (state.current === stream.sessionId) updateComposer();
    emit("sessions-dirty");
    emit("turn-finished", stream.sessionId);
    if (stream.sessionId && state.current === stream.sessionId) refreshTokenCounter(stream.sessionId);
  }
}

function onStreamEvent(stream, name, data) {
  data = data || {};
  if (name === "session") {
    const id = data.sessionId;
    if (id && !stream.sessionId) {
      stream.sessionId = id;
      const v = stream.view;
      if (views.get(NEW_KEY) === v) views.delete(NEW_KEY);
      v.key = id;
      views.set(id, v);
      if (state.current === null && $("#messages-host").firstChild === v.el) {
        state.current = id;
        setHash(id);
        if (!sessionById(id)) {
          state.sessions.unshift({ id, title: data.title || "", channel: "web", running: true, readOnly: false, messages: 1 });
        }
        emit("sessions-render");
        updateToolbar();
        emit("session-changed", id);
      }
      emit("sessions-dirty");
    }
    if (data.title) applyTitle(id, data.title);
    return;
  }
  if (name === "title") {
    applyTitle(data.sessionId || stream.sessionId, data.title);
    return;
  }
  stream.answer.apply(name, data);
  if (name === "tool_end" || name === "done") refreshTokenCounterSoon(stream.sessionId);
}

const refreshTokenCounterSoon = (() => {
  let t = null;
  return (id) => {
    clearTimeout(t);
    t = setTimeout(() => {
      if (id && state.current === id) refreshTokenCounter(id);
    }, 800);
  };
})();

function applyTitle(id, title) {
  if (!id || !title) return;
  const s = sessionById(id);
  if (s) s.title = title;
  emit("sessions-render");
  if (state.current === id) setChatTitle(title);
}

export async function stop() {
  const v = currentView();
  const stream = v && v.stream;
  const btn = $("#stop");
  if (!stream) {
    if (!state.current) return;
    btn.disabled = true;
    try {
      const r = await api.stop(state.current);
      if (r && r.stopped === false) toast("Nothing was running.", "info");
    } catch (e) {
      toast(`Could not stop: ${e.message}`, "error");
    } finally {
      btn.disabled = false;
      emit("sessions-dirty");
    }
    return;
  }
  btn.disabled = true;
  try {
    if (!stream.sessionId) {
      stream.controller.abort();
      return;
    }
    const r = await api.stop(stream.sessionId);
    if (r && r.stopped === false) toast("Nothing was running.", "info");
    // The gateway ends the stream with `done` (interrupted); if it does not soon,
    // stop reading it.
    setTimeout(() => {
      if (!stream.ended) stream.controller.abort();
    }, 8000);
  } catch (e) {
    toast(`Could not stop: ${e.message}`, "error");
    stream.controller.abort();
  } finally {
    btn.disabled = false;
  }
}

// ---------- live events from other channels (/api/events) ----------

function isEcho(sessionId) {
  for (const v of views.values()) if (v.stream && v.stream.sessionId === sessionId) return true;
  const ended = recentlyEnded.get(sessionId);
  return !!ended && Date.now() - ended < ECHO_GRACE_MS;
}

export function applyLiveTurn(sessionId, ev) {
  if (!sessionId || !ev || isEcho(sessionId)) return;
  const type = ev.type || ev.event;
  if (type === "title") {
    applyTitle(ev.sessionId || sessionId, ev.title);
    return;
  }
  if (type === "session") return;
  const v = views.get(sessionId);
  if (!v || !v.loaded) return;
  if (!v.live) {
    const welcomeEl = v.el.querySelector(".welcome");
    if (welcomeEl) welcomeEl.remove();
    v.live = new AnswerView(v, true);
    v.live.pending();
    v.el.append(v.live.el);
  }
  v.live.apply(type, ev);
  if (type === "done" || type === "error") {
    v.live = null;
    if (state.current === sessionId) refreshTokenCounter(sessionId);
  }
}

export function applyLiveMessage(m) {
  if (!m || !m.sessionId || isEcho(m.sessionId)) return;
  const v = views.get(m.sessionId);
  if (!v || !v.loaded) return;
  const welcomeEl = v.el.querySelector(".welcome");
  if (welcomeEl) welcomeEl.remove();
  if (m.role === "user") {
    if (v.live) {
      v.live.finish();
      v.live = null;
    }
    v.el.append(userMessage([{ type: "text", text: m.text || "" }]));
  } else if (m.role === "assistant") {
    // A streamed answer already shows this text.
    if (v.live) return;
    const a = new AnswerView(v, false);
    a.addText(m.text || "");
    a.finish();
    v.el.append(a.el);
  }
  scrollDown(v);
}

// ---------- approvals polling ----------

let pollTimer = null;

function anyRunning() {
  for (const v of views.values()) if (v.stream || v.live) return true;
  const s = state.current ? sessionById(state.current) : null;
  return !!(s && s.running);
}

export function schedulePoll(ms) {
  clearTimeout(pollTimer);
  pollTimer = setTimeout(pollApprovals, ms);
}

export async function pollApprovals() {
  clearTimeout(pollTimer);
  const askedAt = Date.now();
  try {
    const r = await api.approvals();
    const list = (r && r.data) || [];
    reconcile(new Set(list.map((a) => a.id)), askedAt);
    for (const a of list) {
      const v = views.get(a.session);
      if (!v || v.approvalIds.has(a.id)) continue;
      const target = (v.stream && v.stream.answer) || v.live;
      if (target) target.approval(a);
      else if (v.loaded) {
        v.approvalIds.add(a.id);
        v.el.append(approvalCard(a));
      }
      scrollDown(v);
    }
    emit("approvals", list);
  } catch {
    // The next poll tries again; a signed-out page is handled by the boot code.
  }
  pollTimer = setTimeout(pollApprovals, anyRunning() ? 3000 : 20000);
}

// ---------- toolbar actions ----------

async function compress() {
  const id = state.current;
  if (!id) return;
  const ok = await confirmDialog(
    "Compress this conversation?",
    "Older messages are summarized into one note; the full transcript stays archived.",
    "Compress",
    false,
  );
  if (!ok) return;
  const btn = $("#compress");
  btn.disabled = true;
  btn.classList.add("busy");
  try {
    const r = await api.compress(id);
    toast(`Compressed: ${fmtNumber(r.summarized)} messages summarized, ${fmtNumber(r.kept)} kept.`, "success");
    const v = views.get(id);
    if (v && !v.stream) await loadHistory(v, id);
    refreshTokenCounter(id);
    emit("turn-finished", id);
  } catch (e) {
    toast(e.status === 409 ? "A turn is running; compress when it has finished." : `Could not compress: ${e.message}`, "error");
  } finally {
    btn.disabled = false;
    btn.classList.remove("busy");
  }
}

async function toggleRag(ev) {
  const id = state.current;
  const box = ev.currentTarget;
  if (!id) return;
  const want = box.checked;
  try {
    const r = await api.setRagMode(id, want);
    if (r && typeof r.enabled === "boolean") box.checked = r.enabled;
    toast(`RAG mode ${box.checked ? "on" : "off"} for this session.`, "info", 2000);
  } catch (e) {
    box.checked = !want;
    toast(`Could not change RAG mode: ${e.message}`, "error");
  }
}

export function initChat() {
  const input = $("#message-input");
  $("#composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    send();
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.ctrlKey && !ev.altKey && !ev.metaKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });
  input.addEventListener("input", autoGrow);
  input.addEventListener("paste", (ev) => {
    const files = [...(ev.clipboardData ? ev.clipboardData.files : [])].filter((f) => f.type.startsWith("image/"));
    if (files.length) {
      ev.preventDefault();
      addFiles(files);
    }
  });
  $("#attach").addEventListener("click", () => $("#image-input").click());
  $("#image-input").addEventListener("change", (ev) => {
    addFiles([...ev.target.files]);
    ev.target.value = "";
  });
  const pane = $("#chat-pane");
  const overlay = $("#drop-overlay");
  let depth = 0;
  const hasFiles = (ev) => ev.dataTransfer && [...ev.dataTransfer.types].includes("Files");
  pane.addEventListener("dragenter", (ev) => {
    if (!hasFiles(ev)) return;
    depth += 1;
    overlay.hidden = isReadOnly(state.current);
  });
  pane.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  pane.addEventListener("dragover", (ev) => {
    if (hasFiles(ev)) ev.preventDefault();
  });
  pane.addEventListener("drop", (ev) => {
    if (!hasFiles(ev)) return;
    ev.preventDefault();
    depth = 0;
    overlay.hidden = true;
    addFiles([...ev.dataTransfer.files]);
  });
  $("#stop").addEventListener("click", stop);
  $("#compress").addEventListener("click", compress);
  $("#rag-toggle").addEventListener("change", toggleRag);
  $("#open-session").addEventListener("click", () => {
    if (state.current) state.opened.add(state.current);
    updateToolbar();
    updateComposer();
    input.focus();
  });
  on("sessions-updated", () => {
    if (!state.current) return;
    const s = sessionById(state.current);
    if (s) setChatTitle(s.title);
    $("#readonly-bar").hidden = !isReadOnly(state.current);
    updateComposer();
  });
  on("approval-event", () => pollApprovals());
  on("approvals-changed", () => schedulePoll(300));
  schedulePoll(500);
}
