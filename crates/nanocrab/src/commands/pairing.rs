use nanocrab_gateway::{CODE_LIFETIME_SECS, PairingStore};

use super::Env;
use crate::cli::PairingCommand;

pub fn run(env: &Env, command: PairingCommand) -> anyhow::Result<()> {
    let store = PairingStore::new(&env.paths.state_dir());
    let now = jiff::Timestamp::now().as_second();
    match command {
        PairingCommand::List => {
            let pending = store.pending(now)?;
            let approved = store.approved()?;
            if pending.is_empty() {
                outln!("No pairing requests waiting.")?;
            } else {
                outln!("Waiting for approval:")?;
                for request in &pending {
                    let minutes_left = (request.created_at + CODE_LIFETIME_SECS - now) / 60;
                    outln!(
                        "  {code}  {channel} user {id}{name}  (expires in {minutes_left} min)",
                        code = request.code,
                        channel = request.channel,
                        id = request.sender_id,
                        name = who(request.username.as_deref(), request.display_name.as_deref()),
                    )?;
                }
                outln!("Approve with: nanocrab pairing approve CODE")?;
            }
            if !approved.is_empty() {
                outln!("Approved:")?;
                for sender in &approved {
                    outln!(
                        "  {channel} user {id}{name}",
                        channel = sender.channel,
                        id = sender.sender_id,
                        name = who(sender.username.as_deref(), None),
                    )?;
                }
            }
            Ok(())
        }
        PairingCommand::Approve { code } => {
            let approved = store.approve(&code, now)?;
            outln!(
                "Approved {channel} user {id}{name}: their messages now reach the agent.",
                channel = approved.channel,
                id = approved.sender_id,
                name = who(approved.username.as_deref(), None),
            )?;
            Ok(())
        }
        PairingCommand::Revoke { channel, sender_id } => {
            if store.revoke(&channel, &sender_id)? {
                outln!("Revoked {channel} user {sender_id}.")?;
                Ok(())
            } else {
                anyhow::bail!(
                    "{channel} user {sender_id} was not approved; `nanocrab pairing list` shows who is"
                )
            }
        }
    }
}

fn who(username: Option<&str>, display_name: Option<&str>) -> String {
    match (username, display_name) {
        (Some(user), Some(name)) => format!(" (@{user}, {name})"),
        (Some(user), None) => format!(" (@{user})"),
        (None, Some(name)) => format!(" ({name})"),
        (None, None) => String::new(),
    }
}
