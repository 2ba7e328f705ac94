// Markdown from the model is untrusted: marked renders it, DOMPurify strips anything
// active, and only then does it reach innerHTML. highlight.js works on the code
// elements' text afterwards.

import { el } from "./util.js";

let configured = false;

function setup() {
  if (configured) return;
  configured = true;
  if (window.marked && window.marked.setOptions) {
    window.marked.setOptions({ gfm: true, breaks: true });
  }
  if (window.hljs && window.hljs.configure) {
    window.hljs.configure({ ignoreUnescapedHTML: true });
  }
  if (window.DOMPurify && window.DOMPurify.addHook) {
    window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      // Only images the page can show anyway (the CSP allows self, data: and blob:);
      // anything else would be a request the model chose (even to the gateway's own
      // API), so it becomes its alt text.
      if (node.tagName === "IMG") {
        const src = node.getAttribute("src") || "";
        if (!/^(data:image\/|blob:|\/api\/media\/[A-Za-z0-9]+\.(png|jpe?g|gif|webp)$)/i.test(src)) {
          node.removeAttribute("src");
          node.setAttribute("data-blocked", "");
        }
      }
      if (node.tagName === "INPUT") node.setAttribute("disabled", "");
      if (node.tagName === "A" && node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    });
  }
}

export function toSafeHtml(markdown) {
  setup();
  if (!window.marked || !window.DOMPurify) return null;
  const html = window.marked.parse(markdown || "", { async: false });
  return window.DOMPurify.sanitize(html, {
    USE_PROFILE: { html: true },
    // Task-list checkboxes (<input type=checkbox disabled>) stay; controls that could
    // post or take input do not.
    FORBID_TAGS: ["style", "form", "button", "textarea", "select", "option"],
    FORBID_ATTR: ["style"],
  });
}

// Renders into `target` (its children are replaced). `highlight` is false while a
// stream is still growing the text, so highlight.js runs once per block, not per token.
export function renderMarkdown(target, markdown, highlight = true) {
  const safe = toSafeHtml(markdown);
  if (safe === null) {
    // The vendored libraries failed to load: plain text is still correct.
    target.textContent = markdown || "";
    target.classList.add("plain");
    return;
  }
  target.innerHTML = safe;
  decorateCode(target, highlight);
}

function decorateCode(root, highlight) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code) continue;
    if (highlight && window.hljs && !code.dataset.highlighted) {
      const lang = /language-([\w+#-]+)/.exec(code.className);
      if (lang && !window.hljs.getLanguage(lang[1])) code.classList.add("language-plaintext");
      try {
        window.hljs.highlightElement(code);
      } catch {
        // Leave the block unhighlighted; its text is intact.
      }
    }
    if (!pre.querySelector(".copy-code")) {
      const btn = el("button.copy-code", { type: "button", "aria-label": "Copy code", text: "Copy" });
      btn.addEventListener("click", () => copyText(code.textContent, btn));
      pre.appendChild(btn);
    }
  }
}

export async function copyText(text, btn) {
  try {
    await navigator.clipboard.writeText(text);
    if (btn) {
      const old = btn.textContent;
      btn.textContent = "Copied";
      setTimeout(() => (btn.textContent = old), 1200);
    }
  } catch {
    if (btn) btn.textContent = "Copy failed";
  }
}
