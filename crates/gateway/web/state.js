// Shared page state and a tiny event bus between the modules.

export const state = {
  me: null,
  agent: "main",
  sessions: [],
  // The session shown in the chat pane; null = a new chat not yet sent.
  current: null,
  // Read-only sessions (other channels) the user clicked "Open" on.
  opened: new Set(),
  files: [],
};

const listeners = new Map();

export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, new Set());
  listeners.get(name).add(fn);
}

export function emit(name, detail) {
  for (const fn of listeners.get(name) || []) {
    try {
      fn(detail);
    } catch (e) {
      console.error(`listener for ${name} failed`, e);
    }
  }
}

export function sessionById(id) {
  return state.sessions.find((s) => s.id === id) || null;
}
