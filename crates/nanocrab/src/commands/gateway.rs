//! `nanocrab gateway`: every agent, every configured channel and the HTTP server, until
//! SIGINT or SIGTERM.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use nanocrab_channels::Channel;
use nanocrab_channels::telegram::{TelegramChannel, TelegramSettings};
use nanocrab_core::Agent;
use nanocrab_gateway::{
    Access, Approvals, CronControl, CronStore, Gateway, GatewayAgent, OutboundBus, PairingStore,
    SubagentControl, TurnMessages, Workbench, WorkbenchAgent, server,
};
use nanocrab_policy::Approver;
use nanocrab_tools::{CronJobs, WorkspaceHistory};
use tokio_util::sync::CancellationToken;

use super::Env;
use super::agents::GatewayTools;
use super::web_reports::WebReports;

/// Agents built for `provider/model` API requests, by agent id and model.
type AgentsByModel = HashMap<(String, String), Arc<Agent>>;

pub fn run(env: &Env) -> anyhow::Result<()> {
    // The gateway runs for days: its memory searches sync only the files that changed.
    let env = &env.clone().watching_memory();
    let config = env.load_config()?.config;
    // The agents check their own sections; a channel's section is needed only when it runs.
    for section in ["gateway", "session", "bindings"] {
        config.require(section)?;
    }
    if config.channels.telegram.as_ref().is_some_and(|t| t.enabled) {
        config.require("channels.telegram")?;
    }
    if config.channels.slack.as_ref().is_some_and(|s| s.enabled) {
        config.require("channels.slack")?;
    }
    if config.channels.discord.as_ref().is_some_and(|d| d.enabled) {
        config.require("channels.discord")?;
    }
    if config.channels.email.as_ref().is_some_and(|e| e.enabled) {
        config.require("channels.email")?;
    }
    let bus = OutboundBus::new();
    let web_bus = bus.clone();
    let approvals = Approvals::new(bus.clone());
    // The scheduled jobs, which the agents' `cron` tool changes and the gateway runs.
    let cron = if config.cron.enabled {
        Some(CronControl::new(
            Arc::new(CronStore::open(&env.paths.cron_store())?),
            config.agents.ids().map(str::to_owned).collect(),
            Arc::new(jiff::Timestamp::now),
        ))
    } else {
        None
    };
    let state_dir = env.paths.state_dir();
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("cannot create {}", state_dir.display()))?;

    // Made before the channels, and entered while they are made: Discord's HTTP client starts
    // its rate limiter as a task of the runtime it is made in.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let making_channels = runtime.enter();
    let mut channels: Vec<Arc<dyn Channel>> = Vec::new();
    if let Some(telegram) = config.channels.telegram.as_ref().filter(|t| t.enabled) {
        let token = Some(telegram.token.clone())
            .filter(|token| !token.is_empty())
            .or_else(|| Env::var("TELEGRAM_BOT_TOKEN"))
            .with_context(|| {
                format!(
                    "{}: `channels.telegram.token` is empty and TELEGRAM_BOT_TOKEN is not set; give the token BotFather made, or set \"enabled\": false",
                    env.config_path.display()
                )
            })?;
        let settings = TelegramSettings::from_config(telegram, token, state_dir.clone());
        let channel = TelegramChannel::new(settings)
            .with_context(|| format!("{}: `channels.telegram.proxy`", env.config_path.display()))?;
        channels.push(Arc::new(channel));
    }
    #[cfg(feature = "slack")]
    if let Some(slack) = config.channels.slack.as_ref().filter(|s| s.enabled) {
        use nanocrab_channels::slack::{SlackChannel, SlackSettings};
        let file = env.config_path.display();
        // The tokens at the top are the account `default`; the environment stands in for them
        // only when no other accounts are listed.
        let fallback = |token: &str, var: &str| {
            Some(token.to_owned())
                .filter(|token| !token.is_empty())
                .or_else(|| slack.accounts.is_empty().then(|| Env::var(var)).flatten())
        };
        let mut accounts = Vec::new();
        match (
            fallback(&slack.bot_token, "SLACK_BOT_TOKEN"),
            fallback(&slack.app_token, "SLACK_APP_TOKEN"),
        ) {
            (Some(bot), Some(app)) => {
                accounts.push(("default".to_owned(), bot, app, "channels.slack".to_owned()))
            }
            (None, None) if !slack.accounts.is_empty() => {}
            (bot, _) => anyhow::bail!(
                "{file}: `channels.slack.{}` is empty and {} is not set; give the {} token of your Slack app (see docs/channels.md), or set \"enabled\": false",
                if bot.is_none() {
                    "botToken"
                } else {
                    "appToken"
                },
                if bot.is_none() {
                    "SLACK_BOT_TOKEN"
                } else {
                    "SLACK_APP_TOKEN"
                },
                if bot.is_none() {
                    "bot (xoxb-…)"
                } else {
                    "app-level (xapp-…)"
                },
            ),
        }
        for (name, account) in slack.accounts.iter().filter(|(_, a)| a.enabled) {
            accounts.push((
                name.clone(),
                account.bot_token.clone(),
                account.app_token.clone(),
                format!("channels.slack.accounts.{name}"),
            ));
        }
        for (name, bot, app, key) in accounts {
            // Swapped or pasted-wrong tokens fail here, by name, instead of as `invalid_auth`.
            if !bot.starts_with("xoxb-") {
                anyhow::bail!(
                    "{file}: `{key}.botToken` is not a bot token (xoxb-…): take it from OAuth & Permissions"
                );
            }
            if !app.starts_with("xapp-") {
                anyhow::bail!(
                    "{file}: `{key}.appToken` is not an app-level token (xapp-…): make one with connections:write under Basic Information"
                );
            }
            let settings = SlackSettings::from_config(slack, &name, bot, app);
            channels.push(Arc::new(
                SlackChannel::new(settings).with_context(|| format!("{file}: `{key}`"))?,
            ));
        }
    }
    #[cfg(not(feature = "slack"))]
    if config.channels.slack.as_ref().is_some_and(|s| s.enabled) {
        tracing::warn!(
            "channels.slack: this nanocrab was built without Slack (the `slack` feature); the section is ignored"
        );
    }
    if let Some(discord) = config.channels.discord.as_ref().filter(|d| d.enabled) {
        discord_channels(env, discord, &state_dir, &mut channels)?;
    }
    if let Some(email) = config.channels.email.as_ref().filter(|e| e.enabled) {
        email_channels(env, email, &state_dir, &mut channels)?;
    }
    for (name, section) in &config.channels.other {
        if section.get("enabled").and_then(|e| e.as_bool()) != Some(false) {
            tracing::warn!(
                "channels.{name}: this nanocrab has no {name} channel yet; the section is ignored"
            );
        }
    }
    drop(making_channels);
    // The chats the agents' `message` tool writes to, on the channels just made.
    let messages = TurnMessages::new(
        bus.clone(),
        channels
            .iter()
            .map(|c| (c.name().to_owned(), c.account().to_owned()))
            .collect(),
    );
    // The subagents the agents' `spawn` tool starts; the gateway runs them once it is made.
    let subagents = SubagentControl::new(
        &env.paths.subagents_file(),
        config.agents.defaults.subagents.clone(),
        Arc::new(jiff::Timestamp::now),
    );
    let gateway_tools = GatewayTools {
        cron: cron.clone().map(|c| Arc::new(c) as Arc<dyn CronJobs>),
        chats: Arc::new(messages.clone()),
        subagents: Arc::new(subagents.clone()),
    };
    let mut agents = BTreeMap::new();
    // What the web page shows and edits of each agent.
    let mut workbench_agents = BTreeMap::new();
    for id in config.agents.ids() {
        let built = super::agents::build(
            env,
            &config,
            id,
            None,
            Some(Arc::clone(&approvals) as Arc<dyn Approver>),
            Some(&gateway_tools),
        )?;
        if let Some(notice) = &built.notice {
            tracing::info!(agent = id, "{notice}");
        }
        workbench_agents.insert(
            id.to_owned(),
            WorkbenchAgent {
                workspace: built.workspace.clone(),
                guard: built.guard.clone(),
                index: Some(env.index_setup(&config, id)),
                history: Some(WorkspaceHistory::new(env.paths.workspace_history())),
            },
        );
        agents.insert(
            id.to_owned(),
            GatewayAgent {
                agent: Arc::new(built.agent),
                workspace: built.workspace,
            },
        );
    }
    let access = Access::from_config(&config.channels, PairingStore::new(&state_dir));
    let channel_names: Vec<String> = channels.iter().map(|c| c.name().to_owned()).collect();
    // Voice messages and audio files: `tools.transcription`, or Groq's key in its place.
    let transcriber = nanocrab_provider::Transcriber::from_config(&config, &Env::var)
        .with_context(|| env.config_path.display().to_string())?;
    match &transcriber {
        Some(transcriber) => {
            tracing::info!("voice messages: transcribed by {}", transcriber.describe())
        }
        None => tracing::info!(
            "voice messages: not transcribed (no tools.transcription; see docs/channels.md)"
        ),
    }
    let gateway = Gateway::new(
        &config,
        agents,
        channels,
        &state_dir,
        access,
        Arc::clone(&approvals),
        messages,
        bus,
        transcriber,
    )?;
    let gateway = match cron.clone() {
        Some(control) => gateway.with_cron(control, config.cron.catch_up),
        None => gateway,
    };
    let gateway = gateway.with_subagents(subagents.clone())?;

    // An API request naming `provider/model` runs the agent on that model; each agent and
    // model pair is built once.
    let built: Arc<Mutex<AgentsByModel>> = Arc::default();
    let builder_env = env.clone();
    let builder_config = config.clone();
    let builder_approvals = Arc::clone(&approvals);
    let builder_tools = gateway_tools.clone();
    let model_builder: server::ModelBuilder = Arc::new(move |id: &str, model: &str| {
        let key = (id.to_owned(), model.to_owned());
        let mut built = built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(agent) = built.get(&key) {
            return Ok(Arc::clone(agent));
        }
        let approver = Some(Arc::clone(&builder_approvals) as Arc<dyn Approver>);
        let agent = super::agents::build(
            &builder_env,
            &builder_config,
            id,
            Some(model),
            approver,
            Some(&builder_tools),
        )
        .map(|b| Arc::new(b.agent))
        .map_err(|err| format!("{err:#}"))?;
        built.insert(key, Arc::clone(&agent));
        Ok(agent)
    });
    runtime.block_on(async move {
        let listener = server::bind(&config.gateway).await?;
        let address = listener.local_addr()?;
        let state = server::ServerState::new(
            &config.gateway,
            gateway.turns().clone(),
            Arc::clone(gateway.status()),
        );
        let web_approvals = Arc::clone(&approvals);
        let mut routes = nanocrab_gateway::openai_routes()
            .merge(nanocrab_gateway::approval_routes(Arc::clone(&approvals)))
            .merge(nanocrab_gateway::heartbeat_routes(
                gateway.heartbeats().clone(),
            ))
            .merge(nanocrab_gateway::subagent_routes(subagents));
        if let Some(scheduler) = gateway.cron() {
            routes = routes.merge(nanocrab_gateway::cron_routes(scheduler.clone()));
        }
        let state = state
            .with_model_builder(model_builder)
            .with_heartbeats(gateway.heartbeats().clone());
        let reports = WebReports {
            env: env.clone(),
            config: config.clone(),
            cron: cron.clone(),
        };
        let workbench = Workbench::new(
            state.clone(),
            workbench_agents,
            web_approvals,
            web_bus,
            Arc::new(reports),
            Some(&state_dir),
        );
        let app = server::app(state, routes).merge(nanocrab_gateway::web_routes(workbench));
        let shutdown = CancellationToken::new();
        let http = tokio::spawn(server::serve(listener, app, shutdown.clone()));
        eprintln!(
            "nanocrab gateway · channels: {} · agents: {} · listening on http://{address}",
            if channel_names.is_empty() {
                "none (the web page and HTTP API only)".to_owned()
            } else {
                channel_names.join(", ")
            },
            config.agents.ids().collect::<Vec<_>>().join(", "),
        );
        eprintln!("the web page: open http://{address}/ in a browser");
        let signals = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("stopping: finishing running turns (gateway.shutdownGrace)");
            signals.cancel();
        });
        gateway.run(shutdown.clone()).await;
        shutdown.cancel();
        let served = http.await;
        // Whatever the HTTP server's end, the MCP servers do not outlive the gateway.
        env.shutdown_mcp().await;
        served.context("the HTTP server task failed")??;
        anyhow::Ok(())
    })
}

/// One channel per bot of `channels.discord`: the section's own token (or
/// `DISCORD_BOT_TOKEN`) as the `default` account, and each enabled entry of `accounts`.
#[cfg(feature = "discord")]
fn discord_channels(
    env: &Env,
    discord: &nanocrab_config::DiscordConfig,
    state_dir: &std::path::Path,
    channels: &mut Vec<Arc<dyn Channel>>,
) -> anyhow::Result<()> {
    use nanocrab_channels::discord::{DiscordChannel, DiscordSettings};

    let mut bots = Vec::new();
    let own = Some(discord.token.clone())
        .filter(|token| !token.is_empty())
        .or_else(|| Env::var("DISCORD_BOT_TOKEN").filter(|_| discord.accounts.is_empty()));
    match own {
        Some(token) => bots.push(("default".to_owned(), token)),
        None if discord.accounts.is_empty() => anyhow::bail!(
            "{}: `channels.discord.token` is empty and DISCORD_BOT_TOKEN is not set; give the bot token of the application's Bot page, or set \"enabled\": false",
            env.config_path.display()
        ),
        None => {}
    }
    for (name, account) in discord.accounts.iter().filter(|(_, a)| a.enabled) {
        anyhow::ensure!(
            !account.token.is_empty(),
            "{}: `channels.discord.accounts.{name}.token` is empty",
            env.config_path.display()
        );
        bots.push((name.clone(), account.token.clone()));
    }
    for (account, token) in bots {
        let settings =
            DiscordSettings::from_config(discord, &account, token, state_dir.to_path_buf());
        let channel = DiscordChannel::new(settings).with_context(|| {
            format!("{}: `channels.discord.apiBase`", env.config_path.display())
        })?;
        channels.push(Arc::new(channel));
    }
    Ok(())
}

/// Without the `discord` feature a `channels.discord` section cannot run.
#[cfg(not(feature = "discord"))]
fn discord_channels(
    env: &Env,
    _discord: &nanocrab_config::DiscordConfig,
    _state_dir: &std::path::Path,
    _channels: &mut Vec<Arc<dyn Channel>>,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "{}: `channels.discord` is enabled, but this nanocrab was built without the `discord` feature",
        env.config_path.display()
    )
}

/// One channel per mailbox of `channels.email`: the top level as the account `default` (when it
/// names a `fromAddress`), and each enabled entry of `accounts`.
#[cfg(feature = "email")]
fn email_channels(
    env: &Env,
    email: &nanocrab_config::EmailConfig,
    state_dir: &std::path::Path,
    channels: &mut Vec<Arc<dyn Channel>>,
) -> anyhow::Result<()> {
    use nanocrab_channels::email::{EmailChannel, EmailSettings};

    let file = env.config_path.display();
    anyhow::ensure!(
        !email.require_auth_results || !email.authserv_id.trim().is_empty(),
        "{file}: `channels.email.requireAuthResults` is on but `channels.email.authservId` is empty: give the name your mail server writes first in its Authentication-Results headers (docs/channels.md says how to find it)"
    );
    for account in email.mail_accounts() {
        let key = &account.key;
        for (missing, name, what) in [
            (
                account.from_address.is_empty(),
                "fromAddress",
                "the bot's own address",
            ),
            (
                account.imap.host.is_empty(),
                "imapHost",
                "the IMAP server (imap.gmail.com, say)",
            ),
            (
                account.smtp.host.is_empty(),
                "smtpHost",
                "the SMTP server (smtp.gmail.com, say)",
            ),
            (
                account.imap.password.is_empty(),
                "imapPassword",
                "the password or app password (`${EMAIL_PASSWORD}` keeps it out of the file)",
            ),
        ] {
            anyhow::ensure!(
                !missing,
                "{file}: `{key}.{name}` is empty: give {what}, or set \"enabled\": false"
            );
        }
        let mut settings = EmailSettings::from_config(email, &account, state_dir.to_path_buf());
        // A relative CA file is where the config is.
        if let (Some(ca), Some(dir)) = (&settings.ca_file, env.config_path.parent())
            && ca.is_relative()
        {
            settings.ca_file = Some(dir.join(ca));
        }
        let channel = EmailChannel::new(settings).with_context(|| format!("{file}: `{key}`"))?;
        channels.push(Arc::new(channel));
    }
    Ok(())
}

/// Without the `email` feature a `channels.email` section cannot run.
#[cfg(not(feature = "email"))]
fn email_channels(
    env: &Env,
    _email: &nanocrab_config::EmailConfig,
    _state_dir: &std::path::Path,
    _channels: &mut Vec<Arc<dyn Channel>>,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "{}: `channels.email` is enabled, but this nanocrab was built without the `email` feature",
        env.config_path.display()
    )
}

/// SIGINT (Ctrl-C) or SIGTERM (service managers, `kill`).
async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(err) => {
            tracing::warn!("cannot listen for SIGTERM ({err}); stop with Ctrl-C");
            // Ctrl-C still works; an error listening for it means no signal will come.
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
