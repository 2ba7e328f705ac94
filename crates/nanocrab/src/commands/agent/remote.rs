//! `nanocrab agent --remote URL`: the conversation with a gateway that runs elsewhere (a
//! server, while this is a laptop), through the web page's API, shown as a local one is:
//! the streamed answer on stdout, tool calls and notices on stderr, approvals asked at the
//! terminal, Ctrl-C stopping the turn.

use std::io::{IsTerminal as _, Write};

use anyhow::{Context as _, bail};
use nanocrab_schema::{AgentEvent, Image, RetrievedSource, Usage};
use serde_json::{Value, json};

use super::{DIM, EventPrinter, INTERRUPTED, Look, RED, YELLOW};
use crate::cli::AgentArgs;
use crate::commands::Env;

/// The gateway's session for `--session` (`cli:default` unless given): a full key as it is,
/// a name as one of the page's sessions of the main agent.
fn session_key(session: &str) -> String {
    if session.starts_with("agent:") {
        return session.to_owned();
    }
    let name: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("agent:main:web:{name}")
}

/// A signed-in client of the gateway at `base`.
struct Remote {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    csrf: String,
}

impl Remote {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("X-Nanocrab-CSRF", &self.csrf);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// Asks `GET /api/me` who we are, for the CSRF value a client on the gateway's own
    /// machine without a token needs.
    async fn connect(base: &str, token: Option<String>) -> anyhow::Result<Self> {
        let client = nanocrab_config::http::client_builder(nanocrab_config::http::Timeouts {
            connect: std::time::Duration::from_secs(10),
            // A turn may think for minutes between two events.
            read: None,
            total: None,
        })
        .build()?;
        let base = base.trim_end_matches('/').to_owned();
        let mut me = client.get(format!("{base}/api/me"));
        if let Some(token) = &token {
            me = me.bearer_auth(token);
        }
        let response = me
            .send()
            .await
            .with_context(|| format!("cannot reach the gateway at {base}"))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the gateway at {base} wants its token (gateway.auth.token): pass --token TOKEN or set NANOCRAB_GATEWAY_TOKEN"
            );
        }
        if !status.is_success() {
            bail!(
                "the gateway at {base} refused: {} ({status})",
                body["error"]["message"]
                    .as_str()
                    .unwrap_or("no reason given")
            );
        }
        let csrf = body["csrf"]
            .as_str()
            .context(
                "the gateway's /api/me did not say its CSRF value: is this a nanocrab gateway?",
            )?
            .to_owned();
        Ok(Self {
            client,
            base,
            token,
            csrf,
        })
    }
}

pub(super) fn run(
    env: &Env,
    args: &AgentArgs,
    url: &str,
    images: Vec<Image>,
) -> anyhow::Result<()> {
    if args.model.is_some() {
        bail!(
            "--model cannot be used with --remote: the gateway's agent answers with its own model"
        );
    }
    let token = args
        .token
        .clone()
        .or_else(|| Env::var("NANOCRAB_GATEWAY_TOKEN"))
        .filter(|t| !t.trim().is_empty());
    let session = session_key(&args.session);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let remote = runtime.block_on(Remote::connect(url, token))?;
    match &args.message {
        Some(text) => {
            let look = Look::new(
                std::io::stdout().is_terminal(),
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            let mut printer = EventPrinter::new(look, std::io::stdout(), std::io::stderr());
            runtime.block_on(turn(&remote, &session, text, images, &mut printer))
        }
        None => repl(env, &runtime, &remote, &session),
    }
}

fn repl(
    env: &Env,
    runtime: &tokio::runtime::Runtime,
    remote: &Remote,
    session: &str,
) -> anyhow::Result<()> {
    let what = format!("{} · session {session}", remote.base);
    super::conversation(env, &what, |message, printer| {
        if let Err(err) = runtime.block_on(turn(remote, session, message, Vec::new(), printer)) {
            printer.line(RED, &format!("error: {err:#}"));
        }
    })
}

/// One turn: the message sent, its stream shown by `printer` until `done`, approvals asked
/// at the terminal, Ctrl-C sent to the gateway as a stop.
async fn turn<O: Write + Send, E: Write + Send>(
    remote: &Remote,
    session: &str,
    text: &str,
    images: Vec<Image>,
    printer: &mut EventPrinter<O, E>,
) -> anyhow::Result<()> {
    let images: Vec<Value> = images
        .into_iter()
        .map(|image| json!({"mediaType": image.media_type, "data": image.data}))
        .collect();
    let response = remote
        .request(reqwest::Method::POST, "/api/chat")
        .json(&json!({"message": text, "sessionId": session, "images": images}))
        .send()
        .await
        .with_context(|| format!("cannot reach the gateway at {}", remote.base))?;
    let status = response.status();
    if !status.is_success() {
        let body: Value = response.json().await.unwrap_or_default();
        bail!(
            "the gateway refused the message: {} ({status})",
            body["error"]["message"]
                .as_str()
                .unwrap_or("no reason given")
        );
    }
    printer.thinking();
    let mut stream = response;
    let mut buffer = String::new();
    let mut stopped = false;
    loop {
        let chunk = tokio::select! {
            chunk = stream.chunk() => chunk.context("the gateway's stream broke off")?,
            Ok(()) = tokio::signal::ctrl_c(), if !stopped => {
                stopped = true;
                let path = format!("/api/sessions/{}/stop", session.replace(':', "%3A"));
                // The stream says how the turn ended; a failed stop leaves it running.
                if let Err(err) = remote.request(reqwest::Method::POST, &path).send().await {
                    printer.line(RED, &format!("  ✗ could not stop the turn: {err}"));
                }
                continue;
            }
        };
        let Some(chunk) = chunk else {
            bail!("the gateway's stream ended before the answer did");
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let Some((name, data)) = sse_event(&block) else {
                continue;
            };
            match shown(name.as_str(), &data) {
                Shown::Event(event) => printer.print(event),
                Shown::Notice(text) => printer.line(DIM, &format!("  ⟳ {text}")),
                Shown::Approval => answer_approval(remote, &data, printer).await?,
                Shown::Done { text, interrupted } => {
                    printer.print(AgentEvent::Done { text });
                    if interrupted {
                        printer.line(DIM, INTERRUPTED);
                    }
                    return Ok(());
                }
                Shown::Error(message) => {
                    printer.print(AgentEvent::Error {
                        message: message.clone(),
                    });
                    bail!("{message}");
                }
                Shown::Nothing => {}
            }
        }
    }
}

/// The name and data of one server-sent event's text.
fn sse_event(block: &str) -> Option<(String, Value)> {
    let mut name = String::from("message");
    let mut data = String::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("event:") {
            name = value.trim().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.trim_start());
        }
    }
    let data = serde_json::from_str(&data).ok()?;
    Some((name, data))
}

/// What an event of the stream does here.
#[derive(Debug, PartialEq)]
enum Shown {
    Event(AgentEvent),
    Notice(String),
    Approval,
    Done { text: String, interrupted: bool },
    Error(String),
    Nothing,
}

fn text(data: &Value, key: &str) -> String {
    data[key].as_str().unwrap_or_default().to_owned()
}

/// The stream's event `name` as the local agent's [`AgentEvent`] it stands for.
fn shown(name: &str, data: &Value) -> Shown {
    let count = |key: &str| data[key].as_u64().unwrap_or_default();
    Shown::Event(match name {
        "token" => AgentEvent::Token {
            text: text(data, "content"),
        },
        "reasoning" => AgentEvent::Reasoning {
            text: text(data, "content"),
        },
        "tool_start" => AgentEvent::ToolStart {
            call_id: text(data, "callId"),
            name: text(data, "tool"),
            input: data["input"].clone(),
        },
        "tool_end" => AgentEvent::ToolEnd {
            call_id: text(data, "callId"),
            name: text(data, "tool"),
            output: text(data, "output"),
            is_error: data["isError"].as_bool().unwrap_or_default(),
        },
        "new_response" => AgentEvent::NewResponse {
            iteration: u32::try_from(count("iteration")).unwrap_or(u32::MAX),
        },
        "compaction" => AgentEvent::Compaction {
            messages: usize::try_from(count("messages")).unwrap_or(usize::MAX),
        },
        "retrieval" => AgentEvent::Retrieval {
            sources: data["results"]
                .as_array()
                .map(|results| {
                    results
                        .iter()
                        .map(|r| RetrievedSource {
                            path: text(r, "path"),
                            start_line: usize::try_from(r["startLine"].as_u64().unwrap_or(0))
                                .unwrap_or(0),
                            end_line: usize::try_from(r["endLine"].as_u64().unwrap_or(0))
                                .unwrap_or(0),
                            score: r["score"].as_f64().unwrap_or(0.0),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        },
        "usage" => AgentEvent::Usage {
            model: text(data, "model"),
            usage: Usage {
                input_tokens: count("inputTokens"),
                output_tokens: count("outputTokens"),
                cache_read_tokens: count("cacheReadTokens"),
                cache_write_tokens: count("cacheWriteTokens"),
            },
        },
        "notice" => return Shown::Notice(text(data, "message")),
        "approval" => return Shown::Approval,
        "done" => {
            return Shown::Done {
                text: text(data, "content"),
                interrupted: data["interrupted"].as_bool().unwrap_or_default(),
            };
        }
        "error" => return Shown::Error(text(data, "error")),
        // `session` and `title` say nothing the terminal shows; unknown ones come from a
        // newer gateway.
        _ => return Shown::Nothing,
    })
}

/// Asks at the terminal whether the call the gateway waits on may run, and tells it.
async fn answer_approval<O: Write + Send, E: Write + Send>(
    remote: &Remote,
    data: &Value,
    printer: &mut EventPrinter<O, E>,
) -> anyhow::Result<()> {
    let id = text(data, "id");
    let always = data["sessionGrantOffered"].as_bool().unwrap_or_default();
    let needs: Vec<&str> = data["needs"]
        .as_array()
        .map(|n| n.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    printer.stop_spinner();
    printer.line(
        YELLOW,
        &format!(
            "\n  ? {} wants to {}\n    risk: {}; needs: {}",
            text(data, "tool"),
            text(data, "summary"),
            text(data, "risk"),
            needs.join(", ")
        ),
    );
    let choices = if always {
        "[y]es once, [a]lways in this session, [n]o"
    } else {
        "[y]es once, [n]o"
    };
    let answer = loop {
        eprint!("    allow? {choices}: ");
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .map(|read| (read, line))
        })
        .await??;
        // Nobody at the terminal, or an empty answer: the safe one.
        let word = match line {
            (0, _) => "deny".to_owned(),
            (_, line) => line.trim().to_ascii_lowercase(),
        };
        match word.as_str() {
            "" | "n" | "no" | "deny" => break "deny",
            "y" | "yes" | "approve" => break "approve",
            "a" | "always" if always => break "always",
            _ => continue,
        }
    };
    let answered = remote
        .request(reqwest::Method::POST, &format!("/api/approvals/{id}"))
        .json(&json!({ "answer": answer }))
        .send()
        .await?;
    if !answered.status().is_success() {
        printer.line(
            RED,
            &format!("  ✗ the answer came too late: the approval {id} is no longer waiting"),
        );
    }
    printer.thinking();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_session_name_is_one_of_the_gateways_page_sessions() {
        assert_eq!(session_key("cli:default"), "agent:main:web:cli-default");
        assert_eq!(session_key("trip"), "agent:main:web:trip");
        assert_eq!(
            session_key("agent:main:telegram:42"),
            "agent:main:telegram:42"
        );
    }

    #[test]
    fn the_streams_events_are_the_local_agents() {
        let cases = [
            (
                "token",
                json!({"content": "Hi"}),
                Shown::Event(AgentEvent::Token { text: "Hi".into() }),
            ),
            (
                "tool_start",
                json!({"callId": "c1", "tool": "exec", "input": {"command": "ls"}}),
                Shown::Event(AgentEvent::ToolStart {
                    call_id: "c1".into(),
                    name: "exec".into(),
                    input: json!({"command": "ls"}),
                }),
            ),
            (
                "tool_end",
                json!({"callId": "c1", "tool": "exec", "output": "a", "isError": true}),
                Shown::Event(AgentEvent::ToolEnd {
                    call_id: "c1".into(),
                    name: "exec".into(),
                    output: "a".into(),
                    is_error: true,
                }),
            ),
            (
                "done",
                json!({"content": "All done.", "interrupted": false}),
                Shown::Done {
                    text: "All done.".into(),
                    interrupted: false,
                },
            ),
            (
                "error",
                json!({"error": "boom"}),
                Shown::Error("boom".into()),
            ),
            ("title", json!({"title": "x"}), Shown::Nothing),
        ];
        for (name, data, wanted) in cases {
            assert_eq!(shown(name, &data), wanted, "{name}");
        }
    }
}
