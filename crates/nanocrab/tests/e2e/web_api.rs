//! The web page's API (`/api`) through the real gateway: every route, with what a user would
//! do and what a mistaken or hostile request gets.

use nanocrab_testkit::{Gate, Reply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::gateway_process::GatewayProcess;
use crate::harness::{Home, Wire, message_texts, tool_results};
use crate::web_client::{
    WebClient, event_names, eventually, eventually_said, streamed_text, web_home,
};

fn session_of(events: &[crate::web_client::SseEvent]) -> String {
    events[0].data["sessionId"].as_str().unwrap().to_owned()
}

#[test]
fn a_conversation_streams_its_tool_calls_and_is_kept() {
    let home = web_home(json!({}));
    std::fs::write(home.workspace().join("notes.txt"), "the code is 4711\n").unwrap();
    home.mock.push(Reply::tool_call(
        "call_1",
        "read_file",
        json!({"path": "notes.txt"}),
    ));
    home.mock.push(Reply::text("The code is **4711**."));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);

    let events = web.chat(&json!({"message": "what is the code?"}));
    assert_eq!(
        event_names(&events),
        [
            "session",
            "usage",
            "tool_start",
            "tool_end",
            "new_response",
            "token",
            "usage",
            "done"
        ]
    );
    let id = session_of(&events);
    assert!(id.starts_with("agent:main:web:"), "{id}");
    let tool_start = events.iter().find(|e| e.name == "tool_start").unwrap();
    assert_eq!(
        tool_start.data,
        json!({"callId": "call_1", "tool": "read_file", "input": {"path": "notes.txt"}})
    );
    let tool_end = events.iter().find(|e| e.name == "tool_end").unwrap();
    assert!(
        tool_end.data["output"]
            .as_str()
            .unwrap()
            .contains("the code is 4711"),
        "{tool_end:?}"
    );
    assert_eq!(streamed_text(&events), "The code is **4711**.");
    let done = events.last().unwrap();
    assert_eq!(done.data["content"], json!("The code is **4711**."));
    assert_eq!(done.data["interrupted"], json!(false));

    // The transcript holds the whole turn, tool call and result included.
    let history = web.get(&WebClient::session_path(&id, "/history"));
    assert_eq!(history.status, 200);
    let blocks: Vec<(String, String)> = history.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let role = m["role"].as_str().unwrap().to_owned();
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |b| (role.clone(), b["type"].as_str().unwrap().to_owned()))
        })
        .collect();
    assert_eq!(
        blocks,
        [
            ("user".to_owned(), "text".to_owned()),
            ("assistant".to_owned(), "toolCall".to_owned()),
            ("user".to_owned(), "toolResult".to_owned()),
            ("assistant".to_owned(), "text".to_owned()),
        ]
    );

    // The next message continues it, and the model gets the earlier turn.
    home.mock.push(Reply::text("You asked about the code."));
    let events = web.chat(&json!({"message": "what did I ask?", "sessionId": id}));
    assert_eq!(session_of(&events), id);
    let requests = home.requests();
    assert_eq!(
        message_texts(&requests[2].body).first(),
        Some(&("user".to_owned(), "what is the code?".to_owned()))
    );
    assert_eq!(tool_results(&requests[1].body).len(), 1);

    // The system prompt as the next turn sends it, and what each part takes.
    let messages = web.get(&WebClient::session_path(&id, "/messages"));
    assert_eq!(messages.status, 200);
    assert!(
        messages.body["system"]
            .as_str()
            .unwrap()
            .starts_with("You are nanocrab"),
        "{}",
        messages.body["system"]
    );
    assert!(
        messages.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "read_file")
    );
    let tokens = web.get(&format!("/api/tokens/session/{}", id.replace(':', "%3A")));
    assert_eq!(tokens.status, 200);
    for part in ["systemTokens", "toolTokens", "messageTokens"] {
        assert!(
            tokens.body[part].as_u64().unwrap() > 0,
            "{part}: {tokens:?}"
        );
    }
    assert_eq!(
        tokens.body["totalTokens"].as_u64().unwrap(),
        ["systemTokens", "toolTokens", "messageTokens"]
            .iter()
            .map(|p| tokens.body[p].as_u64().unwrap())
            .sum::<u64>()
    );
    assert!(
        gateway.log().lines().all(|l| !l.contains("ERROR")),
        "{}",
        gateway.log()
    );
}

#[test]
fn sessions_are_made_renamed_titled_compressed_and_archived() {
    let home = web_home(json!({}));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);

    let made = web.post("/api/sessions", &json!({"title": "Trip"}));
    assert_eq!(made.status, 201, "{made:?}");
    let id = made.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            made.body["title"].clone(),
            made.body["channel"].clone(),
            made.body["readOnly"].clone()
        ),
        (json!("Trip"), json!("web"), json!(false))
    );
    let listed = web.get("/api/sessions");
    assert_eq!(listed.body["data"][0]["id"], json!(id));

    let renamed = web.put(
        &WebClient::session_path(&id, ""),
        &json!({"title": "Paris trip"}),
    );
    assert_eq!(renamed.body["title"], json!("Paris trip"), "{renamed:?}");

    // Two turns, then a title from the model and a summary of the first turn.
    for (question, answer) in [("plan day one", "Louvre."), ("plan day two", "Orsay.")] {
        home.mock.push(Reply::text(answer));
        web.chat(&json!({"message": question, "sessionId": id}));
    }
    home.mock.push(Reply::text("Title: \"Paris museums\""));
    let titled = web.post(&WebClient::session_path(&id, "/generate-title"), &json!({}));
    assert_eq!(titled.body["title"], json!("Paris museums"), "{titled:?}");

    // What leaves the model's view is saved to memory first, then summarised.
    home.mock.push(Reply::tool_call(
        "save",
        "save_memory",
        json!({"history_entry": "Planned day one: the Louvre.",
               "memory_update": "# Trips\n- Paris: Louvre on day one.\n"}),
    ));
    home.mock.push(Reply::text("Day one: the Louvre."));
    let compressed = web.post(&WebClient::session_path(&id, "/compress"), &json!({}));
    assert_eq!(
        compressed.body,
        json!({"summarized": 2, "kept": 2}),
        "{compressed:?}"
    );
    let history = web.get(&WebClient::session_path(&id, "/history"));
    assert_eq!(
        history.body["compaction"],
        json!({"through": 2, "summary": "Day one: the Louvre."})
    );
    // The next turn sends the summary instead of the first turn.
    home.mock.push(Reply::text("Day three: Orangerie."));
    web.chat(&json!({"message": "plan day three", "sessionId": id}));
    let last = home.requests().last().unwrap().body.to_string();
    assert!(last.contains("Day one: the Louvre."), "{last}");
    assert!(!last.contains("plan day one"), "{last}");

    // A session of one turn has nothing to compress.
    let tiny = web.post("/api/sessions", &json!({}));
    let tiny_id = tiny.body["id"].as_str().unwrap().to_owned();
    let refused = web.post(&WebClient::session_path(&tiny_id, "/compress"), &json!({}));
    assert_eq!(refused.status, 422, "{refused:?}");

    // Deleting archives: the session is gone from the list, its transcript kept.
    assert_eq!(web.delete(&WebClient::session_path(&id, "")).status, 204);
    let listed = web.get("/api/sessions");
    assert!(
        listed.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["id"] != json!(id))
    );
    let archive = home.home().join("sessions/archive");
    assert_eq!(std::fs::read_dir(archive).unwrap().count(), 1);
    assert_eq!(web.delete(&WebClient::session_path(&id, "")).status, 404);
}

#[test]
fn rag_mode_is_chosen_per_session() {
    let home = web_home(json!({}));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let id = web.post("/api/sessions", &json!({})).body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = WebClient::session_path(&id, "/rag-mode");
    let off = json!({"session": id, "enabled": false, "default": false, "available": true});
    assert_eq!(web.get(&path).body, off);
    let on = web.put(&path, &json!({"enabled": true}));
    assert_eq!(on.body["enabled"], json!(true), "{on:?}");
    // The seed's route says the same, for the session named.
    let seed = web.get(&format!(
        "/api/config/rag-mode?session={}",
        id.replace(':', "%3A")
    ));
    assert_eq!(seed.body["enabled"], json!(true));
    let back = web.put(
        "/api/config/rag-mode",
        &json!({"session": id, "enabled": false}),
    );
    assert_eq!(back.body, off);
    assert_eq!(web.get("/api/config/rag-mode").status, 400);
}

#[test]
fn files_are_edited_inside_the_workspace_only() {
    let home = web_home(json!({
        "tools": {"protectedPaths": ["SOUL.md"]},
        "skills": {"extraDirs": ["my-skills"]},
    }));
    std::fs::create_dir_all(home.workspace().join("my-skills/tidy")).unwrap();
    std::fs::write(
        home.workspace().join("my-skills/tidy/SKILL.md"),
        "---\nname: tidy\ndescription: Tidies up.\n---\nTidy.\n",
    )
    .unwrap();
    std::fs::write(home.workspace().join("SOUL.md"), "Be kind.\n").unwrap();
    std::fs::create_dir_all(home.workspace().join("memory")).unwrap();
    std::fs::write(home.workspace().join("memory/MEMORY.md"), "# Memory\n").unwrap();
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);

    let listed = web.get("/api/files");
    let files: Vec<(String, String, bool)> = listed.body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["group"].as_str().unwrap().to_owned(),
                f["protected"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(
        files.contains(&("SOUL.md".to_owned(), "bootstrap".to_owned(), true)),
        "{files:?}"
    );
    assert!(
        files.contains(&("memory/MEMORY.md".to_owned(), "memory".to_owned(), false)),
        "{files:?}"
    );

    let read = web.get("/api/files?path=memory/MEMORY.md");
    assert_eq!(read.body["content"], json!("# Memory\n"));
    let saved = web.put(
        "/api/files?path=memory/MEMORY.md",
        &json!({"content": "# Memory\n- The user's cat is called Mochi.\n"}),
    );
    assert_eq!(saved.status, 200, "{saved:?}");
    assert_eq!(saved.body["reindexed"], json!(true));
    // `memory search` finds the new fact.
    let run = home.run(home.nanocrab().args(["memory", "search", "Mochi"]));
    assert!(run.stdout.contains("Mochi"), "{}{}", run.stdout, run.stderr);

    // Protected, outside, or climbing out: 403 and nothing written.
    for (path, status) in [
        ("SOUL.md", 403),
        // A skill folder outside `skills/` is only ever changed by `nanocrab skills`.
        ("my-skills/tidy/SKILL.md", 403),
        ("../outside.md", 403),
        ("/etc/passwd", 403),
        ("memory/../../outside.md", 403),
    ] {
        let refused = web.put(
            &format!("/api/files?path={path}"),
            &json!({"content": "overwritten"}),
        );
        assert_eq!(refused.status, status, "{path}: {refused:?}");
    }
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("SOUL.md")).unwrap(),
        "Be kind.\n"
    );
    assert!(!home.user_home().join("outside.md").exists());
    assert_eq!(web.get("/api/files?path=../outside.md").status, 403);
    assert_eq!(web.get("/api/files?path=missing.md").status, 404);

    // An instruction file's change keeps what it replaced.
    let agents = web.put(
        "/api/files?path=AGENTS.md",
        &json!({"content": "Answer briefly.\n"}),
    );
    assert_eq!(agents.status, 200, "{agents:?}");
    let run = home.run(home.nanocrab().args(["workspace", "history", "AGENTS.md"]));
    assert!(run.stdout.contains("web"), "{}{}", run.stdout, run.stderr);

    let counted = web.post(
        "/api/tokens/files",
        &json!({"paths": ["memory/MEMORY.md", "missing.md"]}),
    );
    let files = counted.body["files"].as_array().unwrap();
    assert!(files[0]["tokens"].as_u64().unwrap() > 5, "{counted:?}");
    assert_eq!(files[1]["tokens"], Value::Null);
}

#[test]
fn approvals_are_asked_in_the_stream_and_answered_from_the_page() {
    let home = web_home(json!({"tools": {"exec": {"mode": "full"}}}));
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "touch made.txt && echo made"}),
    ));
    home.mock.push(Reply::text("Done."));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let base = gateway.base.clone();
    let answering = std::thread::spawn(move || {
        let web = WebClient::signed_in(&base);
        let (id, pending) = eventually("the approval", || {
            let pending = web.get("/api/approvals");
            let first = pending.body["data"][0].clone();
            first["id"]
                .as_str()
                .map(|id| (id.to_owned(), first.clone()))
        });
        let answered = web.post(
            &format!("/api/approvals/{id}"),
            &json!({"answer": "approve"}),
        );
        assert_eq!(answered.status, 200, "{answered:?}");
        let again = web.post(
            &format!("/api/approvals/{id}"),
            &json!({"answer": "approve"}),
        );
        assert_eq!(again.status, 404);
        pending
    });
    let events = web.chat(&json!({"message": "make the file"}));
    let asked = answering.join().unwrap();
    assert_eq!(asked["tool"], json!("exec"));
    let approval = events.iter().find(|e| e.name == "approval").unwrap();
    assert_eq!(approval.data, asked);
    assert_eq!(events.last().unwrap().data["content"], json!("Done."));
    assert!(home.workspace().join("made.txt").exists());
    let bad = web.post("/api/approvals/nope", &json!({"answer": "maybe"}));
    assert_eq!(bad.status, 400);
}

#[test]
fn a_run_survives_a_reader_that_leaves_and_is_stopped_from_the_page() {
    let home = web_home(json!({}));
    let gate = Gate::new();
    home.mock
        .push(Reply::text("A long answer that takes a while.").held_by(&gate));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);

    // The reader hangs up after the first event; the turn goes on and is saved.
    let first = web.chat_until(&json!({"message": "tell me a story"}), "session");
    let id = session_of(&first);
    gate.open();
    let history = eventually_history(&gateway, &web, &id, 2);
    assert_eq!(
        history["messages"][1]["content"][0]["text"],
        json!("A long answer that takes a while.")
    );

    // A model that hangs mid-answer: the page's stop interrupts it, and what was said stays.
    home.mock.push(Reply::stall_after("Once upon"));
    let base = gateway.base.clone();
    let stopped_id = id.clone();
    let stopper = std::thread::spawn(move || {
        let web = WebClient::signed_in(&base);
        eventually("the turn to stop", || {
            let stopped = web.post(&WebClient::session_path(&stopped_id, "/stop"), &json!({}));
            assert_eq!(stopped.status, 200, "{stopped:?}");
            // Nothing to stop until the turn has begun.
            (stopped.body["stopped"] == json!(true)).then_some(())
        });
    });
    let events = web.chat(&json!({"message": "another", "sessionId": id}));
    stopper.join().unwrap();
    let done = events.last().unwrap();
    assert_eq!(done.name, "done", "{events:?}");
    assert_eq!(done.data["interrupted"], json!(true), "{events:?}");
    let history = web.get(&WebClient::session_path(&id, "/history"));
    let last = history.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("interrupted"), "{last}");
}

/// The history of session `id` once it holds at least `messages` messages.
fn eventually_history(
    gateway: &GatewayProcess,
    web: &WebClient,
    id: &str,
    messages: usize,
) -> Value {
    eventually_said(
        || format!("{messages} messages; gateway log:\n{}", gateway.log()),
        || {
            let history = web.get(&WebClient::session_path(id, "/history"));
            (history.body["messages"].as_array().map_or(0, Vec::len) >= messages)
                .then_some(history.body)
        },
    )
}

#[test]
fn bad_requests_get_clear_errors() {
    let home = web_home(json!({}));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let unknown = WebClient::session_path("agent:main:web:nope", "/history");
    assert_eq!(web.get(&unknown).status, 404);
    assert_eq!(web.get("/api/sessions/not-a-key/history").status, 404);
    let malformed = web.raw(
        "POST",
        "/api/chat",
        "{not json",
        &[("content-type", "application/json")],
    );
    assert_eq!(malformed.status, 400, "{malformed:?}");
    assert!(
        malformed.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad JSON"),
        "{malformed:?}"
    );
    assert_eq!(web.post("/api/chat", &json!({"message": "  "})).status, 400);
    assert_eq!(
        web.post(
            "/api/chat",
            &json!({"message": "x", "images": [{"mediaType": "text/html", "data": ""}]})
        )
        .status,
        400
    );
    assert_eq!(web.get("/api/nothing-here").status, 404);

    // A state change without the page's CSRF header, or from another site, is refused.
    let mut bare = WebClient::new(&gateway.base);
    assert_eq!(bare.post("/api/sessions", &json!({})).status, 403);
    bare.csrf = web.csrf.clone();
    let cross_site = bare.raw(
        "POST",
        "/api/sessions",
        "{}",
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(cross_site.status, 403);
    // A site whose name points at 127.0.0.1 (DNS rebinding) is refused, reads included.
    bare.host = Some("evil.example:80".to_owned());
    assert_eq!(bare.get("/api/sessions").status, 403);
    assert_eq!(bare.get("/").status, 403);
    // The OpenAI-compatible API refuses a web page's requests too.
    let v1 = bare_v1(&gateway.base);
    assert_eq!(v1, 403);
    // Another site's page may not even read (an `<img>` probing for a file, an EventSource).
    let reader = WebClient::new(&gateway.base);
    let cross_site = reader.raw(
        "GET",
        "/api/sessions",
        "",
        &[("Sec-Fetch-Site", "cross-site")],
    );
    assert_eq!(cross_site.status, 403);
    // Without a token, a proxy on this machine would let everyone in: refused.
    for path in ["/api/me", "/api/sessions", "/v1/models"] {
        let proxied = reader.raw("GET", path, "", &[("X-Forwarded-For", "203.0.113.9")]);
        assert_eq!(proxied.status, 403, "{path}: {proxied:?}");
    }

    // The page itself, with its protections.
    let page = web.get("/");
    assert_eq!(page.status, 200);
    // Unzipped for a client that does not take gzip; browsers get it as it is embedded.
    assert!(
        page.body.as_str().unwrap().starts_with("<!doctype html>"),
        "{page:?}"
    );
    let gzipped = web.send(
        web.client()
            .get(format!("{}/app.js", gateway.base))
            .header("Accept-Encoding", "gzip, br"),
    );
    assert_eq!(gzipped.headers["content-encoding"], "gzip");
    assert_eq!(
        gzipped.headers["content-type"],
        "text/javascript; charset=utf-8"
    );
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.headers.get("access-control-allow-origin").is_none());
}

/// `POST /v1/chat/completions` as a cross-site page would send it; the status.
fn bare_v1(base: &str) -> u16 {
    let web = WebClient::new(base);
    web.raw(
        "POST",
        "/v1/chat/completions",
        r#"{"model":"nanocrab","messages":[{"role":"user","content":"hi"}]}"#,
        &[
            ("Origin", "http://evil.example"),
            ("content-type", "text/plain"),
        ],
    )
    .status
}

#[test]
fn with_a_token_the_page_signs_in_once_and_keeps_a_cookie() {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["gateway"] = json!({ "port": 0, "auth": { "token": "gw-5ecret-token" } });
    home.write_config(config);
    let gateway = home.start_gateway();
    let mut web = WebClient::new(&gateway.base);
    let me = web.get("/api/me");
    assert_eq!(
        (me.status, me.body["needsToken"].clone()),
        (401, json!(true))
    );
    assert_eq!(web.get("/api/sessions").status, 401);
    // The page loads, to ask for the token.
    assert_eq!(web.get("/").status, 200);
    assert_eq!(
        web.post("/api/login", &json!({"token": "wrong"})).status,
        401
    );
    let signed = web.post("/api/login", &json!({"token": "gw-5ecret-token"}));
    assert_eq!(signed.status, 200, "{signed:?}");
    let cookie = signed.headers["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    web.cookie = Some(cookie.split(';').next().unwrap().to_owned());
    web.csrf = Some(signed.body["csrf"].as_str().unwrap().to_owned());
    assert_eq!(web.get("/api/sessions").status, 200);
    assert_eq!(web.post("/api/sessions", &json!({})).status, 201);
    // A remote CLI sends the token instead, and needs no CSRF header.
    let cli = WebClient::new(&gateway.base);
    let listed = cli.send(
        cli.client()
            .get(format!("{}/api/sessions", gateway.base))
            .bearer_auth("gw-5ecret-token"),
    );
    assert_eq!(listed.status, 200);
    assert_eq!(web.post("/api/logout", &json!({})).status, 204);
    assert_eq!(web.get("/api/sessions").status, 401);
    assert!(!gateway.log().contains("gw-5ecret-token"));

    // Requests without any token (a probe, a scanner) are no guesses.
    for _ in 0..8 {
        assert_eq!(cli.get("/v1/models").status, 401);
    }
    // Guessing: wrong bearer tokens on /v1 count as much as wrong sign-ins; past five a
    // minute this address is refused, the right token too.
    for _ in 0..4 {
        let guess = cli.send(
            cli.client()
                .get(format!("{}/v1/models", gateway.base))
                .bearer_auth("guess"),
        );
        assert_eq!(guess.status, 401);
    }
    let blocked = cli.send(
        cli.client()
            .get(format!("{}/v1/models", gateway.base))
            .bearer_auth("gw-5ecret-token"),
    );
    assert_eq!(blocked.status, 429, "{blocked:?}");
    let signed = web.post("/api/login", &json!({"token": "gw-5ecret-token"}));
    assert_eq!(signed.status, 429, "{signed:?}");
}

#[test]
fn reports_and_live_events() {
    let home = web_home(json!({}));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    home.mock.push(Reply::text("Hi."));
    web.chat(&json!({"message": "hello"}));
    let usage = web.get("/api/usage");
    assert_eq!(usage.body["total"]["calls"], json!(1), "{usage:?}");
    let audit = web.get("/api/audit?limit=5");
    assert_eq!(audit.body["data"], json!([]), "{audit:?}");
    let skills = web.get("/api/skills");
    assert!(skills.body["data"].is_array(), "{skills:?}");
    let status = web.get("/api/status");
    assert!(status.body["uptimeSeconds"].is_u64(), "{status:?}");
    assert!(status.body["cron"].is_array(), "{status:?}");
}

#[test]
fn a_slow_reader_gets_the_whole_answer_and_the_page_sees_other_conversations_live() {
    let home = web_home(json!({}));
    // Many more token events than the stream buffers.
    let long: String = (0..800).map(|i| format!("w{i} ")).collect();
    home.mock.push(Reply::text(long.clone()));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let reader = WebClient::signed_in(&gateway.base);
    let events = reader.chat_read_late(&json!({"message": "a long one please"}), || {
        // Nothing is read until the turn is over and saved.
        eventually("the turn to be saved", || {
            let listed = web.get("/api/sessions");
            (listed.body["data"][0]["messages"].as_u64() == Some(2)
                && listed.body["data"][0]["running"] == json!(false))
            .then_some(())
        });
    });
    assert_eq!(streamed_text(&events), long);
    assert_eq!(events.last().unwrap().name, "done");

    // Another client's conversation shows on the live stream.
    home.mock.push(Reply::text("Live answer."));
    let base = gateway.base.clone();
    let watcher = WebClient::signed_in(&gateway.base);
    let live = watcher.events_until("/api/events", "sessions", move || {
        std::thread::spawn(move || {
            let other = WebClient::signed_in(&base);
            other.chat(&json!({"message": "from elsewhere"}));
        });
    });
    let turn: Vec<&Value> = live
        .iter()
        .filter(|e| e.name == "turn")
        .map(|e| &e.data["event"]["type"])
        .collect();
    assert_eq!(turn.first(), Some(&&json!("token")), "{live:?}");
    assert_eq!(turn.last(), Some(&&json!("done")), "{live:?}");
    let text: String = live
        .iter()
        .filter(|e| e.data["event"]["type"] == json!("token"))
        .map(|e| e.data["event"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Live answer.");
}

#[test]
fn the_cli_talks_to_a_gateway_elsewhere_with_its_approvals() {
    let home = web_home(json!({"tools": {"exec": {"mode": "full"}}}));
    let mut config = home.base_config();
    config["gateway"] = json!({ "port": 0, "auth": { "token": "gw-5ecret-token" } });
    config["tools"] = json!({"exec": {"mode": "full"}});
    home.write_config(config);
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "touch made.txt && echo made"}),
    ));
    home.mock.push(Reply::text("Made it."));
    let gateway = home.start_gateway();
    // The laptop: a home of its own, with no config at all.
    let laptop = tempfile::tempdir().unwrap();
    let remote = |args: &[&str], stdin: &str| {
        let mut cmd = assert_cmd::Command::cargo_bin("nanocrab").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", laptop.path())
            .env("NANOCRAB_HOME", laptop.path().join(".nanocrab"))
            .args(["agent", "--remote", &gateway.base])
            .args(args)
            .write_stdin(stdin);
        let output = cmd.output().unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, _, stderr) = remote(&["-m", "hi"], "");
    assert!(!ok);
    assert!(stderr.contains("wants its token"), "{stderr}");

    let (ok, stdout, stderr) = remote(
        &["--token", "gw-5ecret-token", "-m", "make the file"],
        "y\n",
    );
    assert!(ok, "{stdout}\n{stderr}\n{}", gateway.log());
    assert_eq!(stdout, "Made it.\n");
    assert!(stderr.contains("? exec wants to"), "{stderr}");
    assert!(home.workspace().join("made.txt").exists());
    // The conversation is the gateway's, under the CLI's session name.
    let sessions = home.home().join("sessions");
    assert!(
        sessions.join("agent:main:web:cli-default.jsonl").exists(),
        "{:?}",
        std::fs::read_dir(&sessions).unwrap().collect::<Vec<_>>()
    );
    assert!(!stderr.contains("gw-5ecret-token"));
}

#[test]
fn an_image_sent_from_the_page_reaches_the_model_and_is_shown_again() {
    const PNG_BASE64: &str = "iVBORw0KGgpub3QtcmVhbGx5LXBpeGVscw==";
    let home = web_home(json!({}));
    home.mock.push(Reply::text("A very small picture."));
    let gateway = home.start_gateway();
    let web = WebClient::signed_in(&gateway.base);
    let events = web.chat(&json!({
        "message": "what is this?",
        "images": [{"mediaType": "image/png", "data": PNG_BASE64}],
    }));
    let id = session_of(&events);
    let sent = home.requests()[0].body.to_string();
    assert!(sent.contains(PNG_BASE64), "{sent}");
    let history = web.get(&WebClient::session_path(&id, "/history"));
    let image = &history.body["messages"][0]["content"][1];
    assert_eq!(image["type"], json!("image"), "{history:?}");
    let url = image["url"].as_str().unwrap();
    let fetched = web.get(url);
    assert_eq!(fetched.status, 200, "{url}");
    assert_eq!(fetched.headers["content-type"], "image/png");
    assert_eq!(web.get("/api/media/..%2Fconfig.json").status, 404);
}

#[test]
fn a_sign_in_outlives_a_restart_and_not_a_new_token() {
    let home = Home::new(Wire::OpenAi);
    let config_with = |token: &str| {
        let mut config = home.base_config();
        config["gateway"] = json!({ "port": 0, "auth": { "token": token } });
        config
    };
    home.write_config(config_with("gw-5ecret-token"));
    let gateway = home.start_gateway();
    let web = WebClient::new(&gateway.base);
    let signed = web.post("/api/login", &json!({"token": "gw-5ecret-token"}));
    assert_eq!(signed.status, 200, "{signed:?}");
    let cookie = signed.headers["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let csrf = signed.body["csrf"].as_str().unwrap().to_owned();
    assert!(gateway.terminate().success());
    // No cookie is kept on disk, only digests.
    let kept = std::fs::read_to_string(home.home().join("state/web-sign-ins.json")).unwrap();
    assert!(!kept.contains(cookie.split('=').nth(1).unwrap()), "{kept}");

    let gateway = home.start_gateway();
    let mut web = WebClient::new(&gateway.base);
    web.cookie = Some(cookie.clone());
    web.csrf = Some(csrf.clone());
    assert_eq!(web.get("/api/sessions").status, 200);
    // The page open before the restart goes on writing with what it had.
    assert_eq!(web.post("/api/sessions", &json!({})).status, 201);
    assert!(gateway.terminate().success());

    home.write_config(config_with("another-5ecret-token"));
    let gateway = home.start_gateway();
    let mut web = WebClient::new(&gateway.base);
    web.cookie = Some(cookie);
    assert_eq!(web.get("/api/sessions").status, 401);
}

#[test]
fn another_tab_hears_of_a_session_made_renamed_or_deleted() {
    let home = web_home(json!({}));
    let gateway = home.start_gateway();
    let watcher = WebClient::signed_in(&gateway.base);
    let base = gateway.base.clone();
    let live = watcher.events_until("/api/events", "sessions", move || {
        std::thread::spawn(move || {
            let other = WebClient::signed_in(&base);
            assert_eq!(other.post("/api/sessions", &json!({})).status, 201);
        });
    });
    assert_eq!(live.last().unwrap().name, "sessions");
}
