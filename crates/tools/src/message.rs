//! `message(content, to?, file?)`: the agent says something now, mid-turn, to the chat its run
//! answers or, with a grant, to another chat; optionally with a file of its workspace. The
//! chats live with whoever runs the channels (the gateway), behind [`ChatMessages`]; this tool
//! reads the call and works out what it needs: nothing for the run's own chat, the capability
//! `message:<channel>:<chat>` for any other, and the file must be in the workspace.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use nanocrab_policy::{Capability, Invocation, PathGuard, Risk};
use nanocrab_schema::{RunSource, TraceId};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::arguments::TypedTool;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// A final reply that is this, alone or at its start or end, is not sent: the agent has
/// said what it had to say with the `message` tool, or has nothing to say.
pub const NO_REPLY: &str = "NO_REPLY";

/// The largest file the tool sends: what Telegram's Bot API takes from a bot.
pub const MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// A chat as the agent names it: `telegram:218485655`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAddress {
    pub channel: String,
    pub chat_id: String,
}

impl std::fmt::Display for ChatAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.channel, self.chat_id)
    }
}

/// One message as the agent asks for it, checked by the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRequest {
    /// The run's trace, by which whoever started the run knows its chat ("this chat");
    /// `None` for a subagent, which answers no chat (its final answer goes to the run that
    /// started it) though it shares that run's trace.
    pub turn: Option<TraceId>,
    /// `None`: the chat the run answers.
    pub to: Option<ChatAddress>,
    pub text: String,
    /// A file of the workspace, resolved, sent with the text.
    pub file: Option<PathBuf>,
}

/// A send in progress: a line for the model, or why nothing was sent.
pub type Sending<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// The chats of one process, as the agent's `message` tool sees them.
pub trait ChatMessages: Send + Sync {
    /// Sends `request` and says how it went once the platform took it (or it was kept to be
    /// sent later); an error names the chat and why.
    fn send(&self, request: MessageRequest) -> Sending<'_>;
}

pub struct MessageTool {
    chats: Arc<dyn ChatMessages>,
    guard: Arc<PathGuard>,
}

impl MessageTool {
    /// Files are read through `guard`, and only from its workspace.
    pub fn new(chats: Arc<dyn ChatMessages>, guard: Arc<PathGuard>) -> Self {
        Self { chats, guard }
    }

    /// The chat `to` names, `None` for the run's own chat.
    fn target(args: &MessageArgs, ctx: &ToolContext) -> Result<Option<ChatAddress>, ToolError> {
        let Some(to) = args
            .to
            .as_deref()
            .map(str::trim)
            .filter(|to| !to.is_empty())
        else {
            return Ok(None);
        };
        let address = match to.split_once(':') {
            Some((channel, chat)) if !channel.trim().is_empty() && !chat.trim().is_empty() => {
                ChatAddress {
                    channel: channel.trim().to_owned(),
                    chat_id: chat.trim().to_owned(),
                }
            }
            Some(_) | None => {
                return Err(ToolError::InvalidArguments(format!(
                    "to: `{to}` is not channel:chat (e.g. telegram:218485655); leave it out for \
                     this chat"
                )));
            }
        };
        let own = ctx.channel.as_deref() == Some(address.channel.as_str())
            && ctx.chat_id.as_deref() == Some(address.chat_id.as_str());
        Ok((!own).then_some(address))
    }

    /// The file to send, resolved: it must be in the workspace.
    fn attachment(&self, args: &MessageArgs) -> Result<Option<PathBuf>, ToolError> {
        let Some(file) = args.file.as_deref().filter(|f| !f.trim().is_empty()) else {
            return Ok(None);
        };
        // A refusal, audited as a denial like the guard's other ones.
        Ok(Some(self.guard.check_workspace_read(file)?))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageArgs {
    content: String,
    /// channel:chat
    to: Option<String>,
    /// workspace file
    file: Option<String>,
}

impl TypedTool for MessageTool {
    type Args = MessageArgs;

    const NAME: &'static str = "message";

    fn description(&self) -> String {
        format!("Send now, to this chat or `to`. If that was your whole answer, reply {NO_REPLY}.")
    }

    fn invocation(&self, args: &MessageArgs, ctx: &ToolContext) -> Result<Invocation, ToolError> {
        let file = self.attachment(args)?;
        let to = Self::target(args, ctx)?;
        let mut capabilities = Vec::new();
        let where_ = match &to {
            Some(address) => {
                capabilities.push(Capability::Message(address.to_string()));
                format!("to {address}")
            }
            None => "to this chat".to_owned(),
        };
        let with = match &file {
            Some(path) => {
                capabilities.push(Capability::FsRead(path.clone()));
                format!(" with {}", path.display())
            }
            None => String::new(),
        };
        // The run's own chat is granted implicitly; another takes a grant in config, or a
        // person's yes for this one message.
        let risk = if to.is_some() {
            Risk::Unsafe
        } else {
            Risk::Safe
        };
        Ok(Invocation::new(
            risk,
            format!("send a message {where_}{with}: {}", args.content),
            capabilities,
        ))
    }

    async fn call(&self, args: MessageArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let to = Self::target(&args, ctx)?;
        let subagent = match &ctx.source {
            RunSource::Subagent { .. } => true,
            RunSource::Chat | RunSource::Heartbeat | RunSource::Cron { .. } => false,
        };
        if subagent && to.is_none() {
            return Err(ToolError::Rejected(
                "a subagent has no chat of its own: your final answer goes to the run that \
                 started you; give `to` (channel:chat) to write to a chat"
                    .to_owned(),
            ));
        }
        let file = self.attachment(&args)?;
        if args.content.trim().is_empty() && file.is_none() {
            return Err(ToolError::InvalidArguments(
                "content: say what to send".to_owned(),
            ));
        }
        if let Some(path) = &file {
            let io = |source| ToolError::Io {
                action: "read",
                path: path.clone(),
                source,
            };
            let metadata = std::fs::metadata(path).map_err(io)?;
            if !metadata.is_file() {
                return Err(ToolError::Rejected(format!(
                    "file: {} is not a file",
                    path.display()
                )));
            }
            if metadata.len() > MAX_FILE_BYTES {
                return Err(ToolError::Rejected(format!(
                    "file: {} is {} bytes, more than the {MAX_FILE_BYTES} a message can carry",
                    path.display(),
                    metadata.len()
                )));
            }
        }
        self.chats
            .send(MessageRequest {
                turn: (!subagent).then(|| ctx.trace_id.clone()),
                to,
                text: args.content,
                file,
            })
            .await
            .map(ToolOutput::trusted)
            .map_err(ToolError::Rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanocrab_config::ToolsConfig;
    use pretty_assertions::assert_eq;
    use std::sync::Mutex;

    /// Records what it was asked to send.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<MessageRequest>>,
    }

    impl ChatMessages for Recorder {
        fn send(&self, request: MessageRequest) -> Sending<'_> {
            Box::pin(async move {
                let line = match &request.to {
                    Some(to) if to.channel == "slack" => {
                        return Err("no channel `slack` runs here; channels: telegram".to_owned());
                    }
                    Some(to) => format!("sent to {to}"),
                    None => "sent to this chat".to_owned(),
                };
                self.sent.lock().unwrap().push(request);
                Ok(line)
            })
        }
    }

    struct Setup {
        dir: tempfile::TempDir,
        recorder: Arc<Recorder>,
        tool: MessageTool,
        ctx: ToolContext,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let guard = Arc::new(PathGuard::new(&workspace, &ToolsConfig::default(), None).unwrap());
        let recorder = Arc::new(Recorder::default());
        let tool = MessageTool::new(Arc::clone(&recorder) as Arc<dyn ChatMessages>, guard);
        let mut ctx = ToolContext::new(&workspace);
        ctx.channel = Some("telegram".to_owned());
        ctx.chat_id = Some("42".to_owned());
        Setup {
            dir,
            recorder,
            tool,
            ctx,
        }
    }

    fn call(setup: &Setup, args: serde_json::Value) -> Result<String, String> {
        let prepared =
            crate::Tool::prepare(&setup.tool, args, &setup.ctx).map_err(|e| e.to_string())?;
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(prepared.run)
            .map(|o| o.text)
            .map_err(|e| e.to_string())
    }

    fn needs(setup: &Setup, args: serde_json::Value) -> (Risk, Vec<Capability>) {
        let prepared = crate::Tool::prepare(&setup.tool, args, &setup.ctx).unwrap();
        (prepared.invocation.risk, prepared.invocation.capabilities)
    }

    #[test]
    fn this_chat_needs_nothing_and_another_needs_its_message_capability() {
        let setup = setup();
        assert_eq!(
            needs(&setup, serde_json::json!({"content": "on my way"})),
            (Risk::Safe, vec![])
        );
        // Naming the run's own chat is the same as leaving `to` out.
        assert_eq!(
            needs(
                &setup,
                serde_json::json!({"content": "hi", "to": "telegram:42"})
            ),
            (Risk::Safe, vec![])
        );
        assert_eq!(
            needs(
                &setup,
                serde_json::json!({"content": "hi", "to": "telegram:7"})
            ),
            (
                Risk::Unsafe,
                vec![Capability::Message("telegram:7".to_owned())]
            )
        );
    }

    #[test]
    fn a_message_goes_to_the_chat_asked_for_and_errors_come_back_as_they_are() {
        let setup = setup();
        assert_eq!(
            call(&setup, serde_json::json!({"content": "on my way"})),
            Ok("sent to this chat".to_owned())
        );
        assert_eq!(
            call(
                &setup,
                serde_json::json!({"content": "hi", "to": " telegram : 7 "})
            ),
            Ok("sent to telegram:7".to_owned())
        );
        assert_eq!(
            call(
                &setup,
                serde_json::json!({"content": "hi", "to": "slack:C1"})
            ),
            Err("no channel `slack` runs here; channels: telegram".to_owned())
        );
        assert_eq!(
            call(
                &setup,
                serde_json::json!({"content": "hi", "to": "telegram"})
            ),
            Err(
                "to: `telegram` is not channel:chat (e.g. telegram:218485655); leave it out for \
                 this chat"
                    .to_owned()
            )
        );
        assert_eq!(
            call(&setup, serde_json::json!({"content": "  "})),
            Err("content: say what to send".to_owned())
        );
        assert_eq!(
            setup.recorder.sent.lock().unwrap().clone(),
            [
                MessageRequest {
                    turn: Some(setup.ctx.trace_id.clone()),
                    to: None,
                    text: "on my way".to_owned(),
                    file: None,
                },
                MessageRequest {
                    turn: Some(setup.ctx.trace_id.clone()),
                    to: Some(ChatAddress {
                        channel: "telegram".to_owned(),
                        chat_id: "7".to_owned(),
                    }),
                    text: "hi".to_owned(),
                    file: None,
                },
            ]
        );
    }

    #[test]
    fn a_subagent_has_no_chat_of_its_own_and_writes_to_a_chat_as_nobody_s_turn() {
        let mut setup = setup();
        // A subagent's run shares its parent's trace, but answers no chat.
        setup.ctx.channel = None;
        setup.ctx.chat_id = None;
        setup.ctx.source = RunSource::Subagent {
            id: "sa-1f3a".to_owned(),
            parent_run: nanocrab_schema::RunId::new(),
            depth: 1,
        };
        assert_eq!(
            call(&setup, serde_json::json!({"content": "done"})),
            Err(
                "a subagent has no chat of its own: your final answer goes to the run that \
                 started you; give `to` (channel:chat) to write to a chat"
                    .to_owned()
            )
        );
        assert_eq!(
            call(
                &setup,
                serde_json::json!({"content": "done", "to": "telegram:42"})
            ),
            Ok("sent to telegram:42".to_owned())
        );
        // Not the parent's turn: its reply is not held back as said already.
        assert_eq!(
            setup.recorder.sent.lock().unwrap().clone(),
            [MessageRequest {
                turn: None,
                to: Some(ChatAddress {
                    channel: "telegram".to_owned(),
                    chat_id: "42".to_owned(),
                }),
                text: "done".to_owned(),
                file: None,
            }]
        );
    }

    #[test]
    fn a_file_is_sent_from_the_workspace_and_only_from_there() {
        let setup = setup();
        let workspace = setup.dir.path().join("workspace");
        std::fs::write(workspace.join("report.pdf"), b"%PDF-1.7").unwrap();
        std::fs::write(setup.dir.path().join("secret.txt"), b"no").unwrap();
        let resolved = workspace.canonicalize().unwrap().join("report.pdf");
        assert_eq!(
            needs(
                &setup,
                serde_json::json!({"content": "the report", "file": "report.pdf"})
            ),
            (Risk::Safe, vec![Capability::FsRead(resolved.clone())])
        );
        assert_eq!(
            call(
                &setup,
                serde_json::json!({"content": "", "file": "report.pdf"})
            ),
            Ok("sent to this chat".to_owned())
        );
        assert_eq!(
            setup.recorder.sent.lock().unwrap()[0].file,
            Some(resolved.clone())
        );
        // Refused before it runs, as the path guard refuses: the audit log says denied.
        let outside = crate::Tool::prepare(
            &setup.tool,
            serde_json::json!({"content": "x", "file": "../secret.txt"}),
            &setup.ctx,
        )
        .err()
        .unwrap();
        assert!(
            matches!(&outside, ToolError::PathDenied(denial)
                if denial.message().contains("outside the workspace")),
            "an outside path is refused clearly: {outside}"
        );
        assert_eq!(
            call(&setup, serde_json::json!({"content": "x", "file": "."})),
            Err(format!(
                "file: {} is not a file",
                workspace.canonicalize().unwrap().display()
            ))
        );
        assert_eq!(setup.recorder.sent.lock().unwrap().len(), 1);
    }
}
