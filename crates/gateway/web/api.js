// The page's only door to the gateway: same-origin fetches, the CSRF header on
// every state-changing request, and a parser for the SSE stream that POST /api/chat
// answers with (EventSource cannot POST).

let csrf = "";

export function setCsrf(token) {
  csrf = token || "";
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

const enc = encodeURIComponent;

async function errorFrom(res) {
  let body = null;
  let message = `${res.status} ${res.statusText}`;
  try {
    body = await res.json();
    if (body && body.error && body.error.message) message = body.error.message;
    else if (body && typeof body.error === "string") message = body.error;
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): the status line says enough.
  }
  if (res.status === 401) window.dispatchEvent(new CustomEvent("nanocrab:unauthorized"));
  return new ApiError(res.status, message, body);
}

function init(method, body, extra = {}) {
  const headers = { Accept: "application/json", ...(extra.headers || {}) };
  if (method !== "GET" && method !== "HEAD") headers["X-Nanocrab-CSRF"] = csrf;
  const opts = { method, credentials: "same-origin", headers, signal: extra.signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  return opts;
}

export async function request(method, url, body, extra) {
  const res = await fetch(url, init(method, body, extra));
  if (!res.ok) throw await errorFrom(res);
  if (res.status === 204) return null;
  const type = res.headers.get("Content-Type") || "";
  if (!type.includes("json")) return null;
  return res.json();
}

const get = (url) => request("GET", url);
const withAgent = (url, agent) => (agent ? `${url}${url.includes("?") ? "&" : "?"}agent=${enc(agent)}` : url);

export const api = {
  me: async () => {
    const res = await fetch("/api/me", { credentials: "same-origin", headers: { Accept: "application/json" } });
    let body = null;
    try { body = await res.json(); } catch { body = null; }
    if (!res.ok) return { signedIn: false, needsToken: !!(body && body.needsToken), status: res.status, body };
    return body;
  },
  login: (token) => request("POST", "/api/login", { token }),
  logout: () => request("POST", "/api/logout"),

  sessions: () => get("/api/sessions"),
  createSession: (agent) => request("POST", "/api/sessions", agent ? { agent } : {}),
  renameSession: (id, title) => request("PUT", `/api/sessions/${enc(id)}`, { title }),
  deleteSession: (id) => request("DELETE", `/api/sessions/${enc(id)}`),
  history: (id) => get(`/api/sessions/${enc(id)}/history`),
  messages: (id) => get(`/api/sessions/${enc(id)}/messages`),
  generateTitle: (id) => request("POST", `/api/sessions/${enc(id)}/generate-title`),
  compress: (id) => request("POST", `/api/sessions/${enc(id)}/compress`),
  stop: (id) => request("POST", `/api/sessions/${enc(id)}/stop`),
  ragMode: (id) => get(`/api/sessions/${enc(id)}/rag-mode`),
  setRagMode: (id, enabled) => request("PUT", `/api/sessions/${enc(id)}/rag-mode`, { enabled }),

  approvals: () => get("/api/approvals"),
  answerApproval: (id, answer) => request("POST", `/api/approvals/${enc(id)}`, { answer }),

  files: (agent) => get(withAgent("/api/files", agent)),
  readFile: (path, agent) => get(withAgent(`/api/files?path=${enc(path)}`, agent)),
  writeFile: (path, content, agent) => request("PUT", withAgent(`/api/files?path=${enc(path)}`, agent), { content }),

  skills: (agent) => get(withAgent("/api/skills", agent)),
  sessionTokens: (id) => get(`/api/tokens/session/${enc(id)}`),
  fileTokens: (paths, agent) => request("POST", withAgent("/api/tokens/files", agent), { paths }),
  usage: (days = 30) => get(`/api/usage?days=${days}`),
  audit: (limit = 50) => get(`/api/audit?limit=${limit}`),
  status: () => get("/api/status"),
};

// Reads `event: name` / `data: json` blocks as they arrive and calls onEvent(name, data)
// for each. Resolves when the stream ends.
export async function readSse(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const flush = (block) => {
    let name = "message";
    const data = [];
    for (const raw of block.split("\n")) {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    const text = data.join("\n");
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { content: text };
    }
    onEvent(name, parsed);
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      flush(block);
    }
  }
  buffer += decoder.decode();
  if (buffer.trim()) flush(buffer);
}

// POST /api/chat and stream its events. Throws ApiError when the gateway refuses
// the message before streaming (409 busy, 429 queue full, 4xx bad input).
export async function chat(payload, onEvent, signal) {
  const res = await fetch("/api/chat", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-Nanocrab-CSRF": csrf },
    body: JSON.stringify(payload),
    signal,
  });
  if (!res.ok) throw await errorFrom(res);
  const type = res.headers.get("Content-Type") || "";
  if (!type.includes("event-stream") || !res.body) {
    // A gateway that answered with a single JSON body still gets shown.
    const body = await res.json().catch(() => ({}));
    onEvent("done", body);
    return;
  }
  await readSse(res.body, onEvent);
}
