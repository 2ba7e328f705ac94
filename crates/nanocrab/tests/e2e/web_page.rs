//! The web page in a real headless Chromium against the real gateway: what a user does in
//! it, checked where it lands (the transcript, the workspace, the memory index, the model's
//! requests). Screenshots of the main views are written to
//! `target/tmp/web-screenshots/` for `docs/web.md`.

use std::path::PathBuf;

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::harness::Home;
use crate::web_client::WebClient;
use crate::webdriver::Browser;

const ENTER: &str = "\u{E007}";

fn screenshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("web-screenshots")
        .join(format!("{name}.png"))
}

/// [`crate::web_client::web_home`] with a MEMORY.md to edit.
fn web_home(extra: Value) -> Home {
    let home = crate::web_client::web_home(extra);
    std::fs::create_dir_all(home.workspace().join("memory")).unwrap();
    std::fs::write(
        home.workspace().join("memory/MEMORY.md"),
        "# Memory\n- The user lives in Lisbon.\n",
    )
    .unwrap();
    home
}

/// Types `text` into the message box and sends it.
fn send(browser: &Browser, text: &str) {
    browser.type_on("#message-input", text);
    browser.click_on("#send");
}

/// The one session the page's API lists.
fn only_session(web: &WebClient) -> Value {
    let listed = web.get("/api/sessions");
    let data = listed.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{listed:?}");
    data[0].clone()
}

/// The console lines that say the page broke: script errors and CSP refusals.
fn failures(console: &str) -> Vec<String> {
    console
        .lines()
        .filter(|l| l.contains("SEVERE") || l.contains("Content Security Policy"))
        // The live stream's reconnects when the gateway stops are not the page's fault.
        .filter(|l| !l.contains("/api/events"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_conversation_in_the_page_with_its_thought_chain_editor_compress_rag_rename_and_delete() {
    let home = web_home(json!({}));
    std::fs::write(home.workspace().join("notes.txt"), "the code is 4711\n").unwrap();
    home.mock.push(Reply::tool_call(
        "call_1",
        "read_file",
        json!({"path": "notes.txt"}),
    ));
    home.mock.push(Reply::text(
        "The code is **4711**.\n\n```rust\nfn main() {}\n```",
    ));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let browser = Browser::start(1400, 900);
    browser.goto(&format!("{}/", gateway.base));

    // A message, its streamed answer rendered as Markdown, and the tool call behind it.
    send(&browser, "what is the code?");
    browser.text_when(".message.assistant", "the answer", |t| {
        t.contains("The code is 4711.") && t.contains("fn main() {}")
    });
    let bold = browser.execute(
        "return [...document.querySelectorAll('.message.assistant strong')].map(e => e.textContent)",
        json!([]),
    );
    assert_eq!(bold, json!(["4711"]));
    browser.find(".tool-call[data-tool='read_file']");
    let output = browser.execute(
        "return document.querySelector('.tool-call[data-tool=\"read_file\"] .tool-output').textContent",
        json!([]),
    );
    assert!(output.as_str().unwrap().contains("4711"), "{output}");
    browser.execute(
        "document.querySelectorAll('.thought-chain').forEach(d => d.open = true)",
        json!([]),
    );
    browser.screenshot(&screenshot("chat"));
    let session = only_session(&web);
    let id = session["id"].as_str().unwrap().to_owned();
    assert_eq!(session["messages"], json!(4));

    // The editor: a new fact in MEMORY.md, saved, and found by `memory search`.
    browser.click_on("#tab-files");
    browser.click_on(".file-item[data-path='memory/MEMORY.md']");
    browser.wait_for("the file to open", || {
        let text = browser.execute(
            "return window.nanocrabEditor && window.nanocrabEditor.getValue()",
            json!([]),
        );
        text.as_str()
            .is_some_and(|t| t.contains("Lisbon"))
            .then_some(())
    });
    browser.execute(
        "window.nanocrabEditor.setValue(window.nanocrabEditor.getValue() + '- The cat is called Mochi.\\n')",
        json!([]),
    );
    browser.screenshot(&screenshot("editor"));
    browser.click_on("#save-file");
    browser.text_when("#editor-status", "the save", |t| t.starts_with("Saved"));
    assert!(
        std::fs::read_to_string(home.workspace().join("memory/MEMORY.md"))
            .unwrap()
            .contains("Mochi")
    );
    let run = home.run(home.nanocrab().args(["memory", "search", "Mochi"]));
    assert!(run.stdout.contains("Mochi"), "{}{}", run.stdout, run.stderr);

    // The prompt and token views.
    browser.click_on("#tab-prompt");
    browser.text_when("#panel-prompt", "the system prompt", |t| {
        t.contains("You are nanocrab")
    });
    browser.click_on("#tab-tokens");
    browser.screenshot(&screenshot("tokens"));

    // RAG mode, for this conversation.
    browser.click_on("#rag-toggle");
    let rag_path = WebClient::session_path(&id, "/rag-mode");
    browser.wait_for("RAG mode on", || {
        (web.get(&rag_path).body["enabled"] == json!(true)).then_some(())
    });
    browser.click_on("#rag-toggle");
    browser.wait_for("RAG mode off", || {
        (web.get(&rag_path).body["enabled"] == json!(false)).then_some(())
    });

    // A second turn, then the first compressed into a summary.
    home.mock.push(Reply::text("Noted."));
    send(&browser, "remember it");
    browser.text_when(".message.assistant", "the second answer", |t| {
        t.contains("Noted.")
    });
    browser.wait_for("the turn to end", || {
        (only_session(&web)["running"] == json!(false)).then_some(())
    });
    home.mock.push(Reply::tool_call(
        "save",
        "save_memory",
        json!({"history_entry": "The code 4711 was read from notes.txt.",
               "memory_update": "# Memory\n- The user lives in Lisbon.\n- The cat is called Mochi.\n"}),
    ));
    home.mock
        .push(Reply::text("The code 4711 came from notes.txt."));
    browser.click_on("#compress");
    browser.click_on("#confirm-ok");
    let history_path = WebClient::session_path(&id, "/history");
    browser.wait_for("the compression", || {
        web.get(&history_path).body["compaction"]["summary"]
            .as_str()
            .map(str::to_owned)
    });

    // Renamed inline, then deleted (archived).
    browser.click_on(".session-item .rename-session");
    browser.find(".rename-input");
    browser.execute(
        "document.querySelector('.rename-input').value = ''",
        json!([]),
    );
    browser.type_on(".rename-input", &format!("Codes{ENTER}"));
    browser.wait_for("the new title", || {
        (only_session(&web)["title"] == json!("Codes")).then_some(())
    });
    browser.text_when("#session-list", "the title in the list", |t| {
        t.contains("Codes")
    });
    browser.screenshot(&screenshot("sessions"));
    browser.click_on(".session-item .delete-session");
    browser.click_on("#confirm-ok");
    browser.wait_for("the session to go", || {
        web.get("/api/sessions").body["data"]
            .as_array()
            .unwrap()
            .is_empty()
            .then_some(())
    });
    assert_eq!(failures(&browser.console()), Vec::<String>::new());
}

#[test]
fn a_waiting_exec_is_approved_from_the_page() {
    let home = web_home(json!({"tools": {"exec": {"mode": "full"}}}));
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "touch made.txt && echo made"}),
    ));
    home.mock.push(Reply::text("Done: made.txt is there."));
    let gateway = home.start_gateway();
    let browser = Browser::start(1400, 900);
    browser.goto(&format!("{}/", gateway.base));
    send(&browser, "make the file");
    browser.find(".approval .approve");
    browser.screenshot(&screenshot("approval"));
    assert!(!home.workspace().join("made.txt").exists());
    browser.click_on(".approval .approve");
    browser.text_when(".message.assistant", "the answer", |t| {
        t.contains("Done: made.txt is there.")
    });
    assert!(home.workspace().join("made.txt").exists());
    assert_eq!(failures(&browser.console()), Vec::<String>::new());
}

#[test]
fn on_a_phone_and_in_the_dark_the_page_still_works() {
    let home = web_home(json!({}));
    home.mock.push(Reply::text("Hello from a small screen."));
    let gateway = home.start_gateway();
    let browser = Browser::start(390, 844);
    browser.goto(&format!("{}/", gateway.base));
    browser.click_on("#theme-toggle");
    let theme = browser.execute(
        "return document.documentElement.dataset.theme || ''",
        json!([]),
    );
    send(&browser, "hi");
    browser.text_when(".message.assistant", "the answer", |t| {
        t.contains("Hello from a small screen.")
    });
    browser.screenshot(&screenshot("phone"));
    // The toggle flips whatever the system chose; either way the page says which it shows.
    assert!(theme == json!("dark") || theme == json!("light"), "{theme}");
    assert_eq!(failures(&browser.console()), Vec::<String>::new());
}

#[test]
fn a_telegram_conversation_shows_live_and_read_only_until_opened() {
    use nanocrab_testkit::telegram::{self, FakeTelegram};

    const TOKEN: &str = "123456:fake-telegram-5ecret";
    let fake = FakeTelegram::spawn(TOKEN);
    let home = web_home(json!({"channels": {"telegram": {
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        // The sender of the recorded private message (`update-private-text.json`).
        "allowFrom": ["218485655"],
    }}}));
    home.mock.push(Reply::text("Answered on Telegram."));
    let gateway = home.start_gateway();
    let browser = Browser::start(1400, 900);
    browser.goto(&format!("{}/", gateway.base));
    // Once the page listens for what happens elsewhere.
    browser.text_when("#conn-status", "the live stream", |t| t.contains("live"));
    fake.push_update(telegram::private_text("hello from my phone"));
    // The chat's session appears in the list by itself, marked as Telegram's.
    browser.text_when("#session-list", "the Telegram session", |t| {
        t.contains("hello from my phone")
    });
    browser.click_on(".session-item[data-id*=':telegram:']");
    browser.text_when(".message.assistant", "the Telegram answer", |t| {
        t.contains("Answered on Telegram.")
    });
    browser.find("#readonly-bar #open-session");
    browser.screenshot(&screenshot("telegram-live"));
    assert_eq!(failures(&browser.console()), Vec::<String>::new());
}
