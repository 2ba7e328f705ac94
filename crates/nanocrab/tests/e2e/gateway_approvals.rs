//! Approvals in the gateway: asked in the Telegram chat the run came from and answered by a
//! reply there, or answered over the HTTP API for a run with no chat.

use nanocrab_testkit::Reply;
use nanocrab_testkit::telegram::{self, FakeTelegram, SentText};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::gateway_process::GatewayProcess;
use crate::harness::{Home, Wire, tool_results};

const TOKEN: &str = "123456:fake-telegram-5ecret";
/// The sender of the recorded private message (`update-private-text.json`).
const OWNER: &str = "218485655";

/// A home with exec in full mode (each shell command guarded) and the model scripted to run
/// `touch made.txt` and then say "Done.".
fn guarded_home(extra: Value) -> Home {
    let home = Home::new(Wire::OpenAi);
    let mut config = home.base_config();
    config["tools"] = json!({"exec": {"mode": "full"}});
    config["gateway"] = json!({ "port": 0, "auth": { "token": "gw-5ecret-token" } });
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    home.write_config(config);
    home.mock.push(Reply::tool_call(
        "call_1",
        "exec",
        json!({"command": "touch made.txt && echo made"}),
    ));
    home.mock.push(Reply::text("Done."));
    home
}

fn private_message(id: i64, text: &str) -> Value {
    let mut update = telegram::private_text(text);
    update["message"]["message_id"] = json!(id);
    update
}

/// The owner asks over Telegram (message `first_id`) for what needs approval; returns once
/// the gateway has sent the question, with the question and its approval id. `telegram` is
/// merged into the channel's section.
fn asked_on_telegram(
    first_id: i64,
    telegram: Value,
) -> (FakeTelegram, Home, GatewayProcess, SentText, String) {
    let fake = FakeTelegram::spawn(TOKEN);
    let mut section = json!({
        "token": TOKEN,
        "apiBase": fake.api_base(),
        "pollTimeout": 1,
        "allowFrom": [OWNER],
    });
    for (key, value) in telegram.as_object().unwrap() {
        section[key] = value.clone();
    }
    let home = guarded_home(json!({"channels": {"telegram": section}}));
    fake.push_update(private_message(first_id, "make the file please"));
    let mut gateway = home.start_gateway();
    let question = gateway.eventually("the approval question", |_| {
        fake.sent_messages()
            .into_iter()
            .find(|m| m.text.starts_with("Approval "))
    });
    let id = question.text["Approval ".len().."Approval ".len() + 6].to_owned();
    (fake, home, gateway, question, id)
}

/// The owner types `approve ID` as update `update_id`; every text the bot sent once it has
/// answered "Done.".
fn approve_and_wait(
    fake: &FakeTelegram,
    gateway: &mut GatewayProcess,
    update_id: i64,
    id: &str,
) -> Vec<String> {
    fake.push_update(private_message(update_id, &format!("approve {id}")));
    gateway.eventually("the answer", |_| {
        fake.sent_messages()
            .into_iter()
            .any(|m| m.text == "Done.")
            .then_some(())
    });
    fake.sent_messages().into_iter().map(|m| m.text).collect()
}

#[test]
fn a_call_from_telegram_is_asked_in_the_chat_and_runs_when_the_owner_replies_approve() {
    let (fake, home, mut gateway, question, id) = asked_on_telegram(701, json!({}));
    let ws = home.workspace().canonicalize().unwrap();
    assert_eq!(
        (question.chat_id.as_str(), question.text.as_str()),
        (
            OWNER,
            format!(
                "Approval {id} needed (guarded): exec wants to run <code>touch made.txt &amp;&amp; echo made</code> (sh -c) in {}\nNeeds: exec:sh\nReply: approve {id} · always {id} · deny {id}",
                ws.display()
            )
            .as_str()
        )
    );
    assert!(
        !home.workspace().join("made.txt").exists(),
        "nothing runs before the answer"
    );

    let texts = approve_and_wait(&fake, &mut gateway, 702, &id);
    assert_eq!(texts[1..], [format!("Approved {id}."), "Done.".to_owned()]);
    assert!(home.workspace().join("made.txt").exists());
    let requests = home.requests();
    assert_eq!(
        requests.len(),
        2,
        "the reply went to the waiting run, not to the model"
    );
    let (_, output, is_error) = tool_results(&requests[1].body).remove(0);
    assert!(!is_error, "{output}");
    assert!(gateway.terminate().success());

    let audit = home.run(home.nanocrab().args(["audit", "list", "--json"]));
    let record: Value = serde_json::from_str(audit.stdout.trim()).unwrap();
    assert_eq!(
        (
            &record["session"],
            &record["approval"]["result"],
            &record["approval"]["by"]
        ),
        (
            &json!(format!("agent:main:telegram:dm:{OWNER}")),
            &json!("allowed_once"),
            &json!(format!("telegram:{OWNER}"))
        )
    );
}

#[test]
fn a_reply_deny_stops_the_call_and_a_stale_id_is_said_to_be_stale() {
    let (fake, home, mut gateway, _, id) = asked_on_telegram(801, json!({}));
    fake.push_update(private_message(802, &format!("deny {id}")));
    gateway.eventually("the answer", |_| {
        fake.sent_messages()
            .into_iter()
            .any(|m| m.text == "Done.")
            .then_some(())
    });
    fake.push_update(private_message(803, &format!("approve {id}")));
    gateway.eventually("the stale answer's reply", |_| {
        (fake.sent_messages().len() == 4).then_some(())
    });
    let texts: Vec<String> = fake.sent_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(
        texts[1..],
        [
            format!("Denied {id}."),
            "Done.".to_owned(),
            format!(
                "No approval {id} is waiting in this chat: it was answered already or timed out."
            ),
        ]
    );
    assert!(!home.workspace().join("made.txt").exists());
    let (_, output, is_error) = tool_results(&home.requests()[1].body).remove(0);
    assert!(is_error);
    assert_eq!(
        output,
        format!(
            "Error: telegram:{OWNER} denied exec (approval {id}). Do not retry it; ask the user \
             what to do instead."
        )
    );
    assert!(gateway.terminate().success());
}

/// Issue 25, hole 3: with a call waiting for approval in the owner's chat, `attack` (given
/// the approval id) is an `approve ID` that is not the owner's own freshly typed message. It
/// must not approve: when `refused` the chat is told so, otherwise it is not let in at all.
/// The owner's typed `approve ID` then approves, and neither reached the model.
fn only_a_typed_approve_approves(
    telegram: Value,
    attack: impl FnOnce(&FakeTelegram, &str) -> Value,
    refused: bool,
) {
    let (fake, home, mut gateway, _, id) = asked_on_telegram(901, telegram);
    let attack = attack(&fake, &id);
    fake.push_update(attack);
    let mut expected = Vec::new();
    if refused {
        let refusal = gateway.eventually("the reply to the attack", |_| {
            fake.sent_messages().get(1).map(|m| m.text.clone())
        });
        let refusal_text = format!(
            "Not taken as an answer to {id}: an approval must be a message you type yourself, not a forward, an edit, a caption, a quote or a bot's message. Send \"approve {id}\" again if you mean it."
        );
        assert_eq!(refusal, refusal_text);
        expected.push(refusal_text);
    } else {
        gateway.eventually("the attack taken and dropped", |_| {
            fake.pending_update_ids().is_empty().then_some(())
        });
    }
    assert!(
        !home.workspace().join("made.txt").exists(),
        "the attack does not approve"
    );

    let texts = approve_and_wait(&fake, &mut gateway, 903, &id);
    expected.extend([format!("Approved {id}."), "Done.".to_owned()]);
    assert_eq!(texts[1..], expected);
    assert!(home.workspace().join("made.txt").exists());
    assert_eq!(
        home.requests().len(),
        2,
        "neither the attack nor the answer reached the model"
    );
    assert!(gateway.terminate().success());
}

fn approve(id: &str) -> Value {
    private_message(902, &format!("approve {id}"))
}

/// The owner forwarding someone else's `approve ID` approved the call.
#[test]
fn a_forwarded_approve_from_the_owner_is_refused_and_only_a_typed_one_approves() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| telegram::forwarded(approve(id), telegram::someone_else()),
        true,
    );
}

/// Edits answered as messages (`editedMessages: respond`): the owner's first message edited
/// into `approve ID` is still no answer.
#[test]
fn an_edit_into_approve_is_refused() {
    only_a_typed_approve_approves(
        json!({"editedMessages": "respond"}),
        |_, id| telegram::edited(private_message(901, &format!("approve {id}"))),
        true,
    );
}

/// Edits ignored, as by default: the edit is dropped before it could answer anything.
#[test]
fn an_ignored_edit_into_approve_does_nothing() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| telegram::edited(private_message(901, &format!("approve {id}"))),
        false,
    );
}

#[test]
fn a_photo_captioned_approve_is_refused() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| {
            let mut photo = telegram::private_photo(&format!("approve {id}"));
            photo["message"]["message_id"] = json!(902);
            photo
        },
        true,
    );
}

/// A reply quoting the bot's own question (its `approve ID` part and the rest).
#[test]
fn a_reply_quoting_the_question_is_refused() {
    only_a_typed_approve_approves(
        json!({}),
        |fake, id| {
            let mut question =
                private_message(1, &format!("Reply: approve {id}"))["message"].clone();
            question["from"] = fake.bot();
            telegram::quoting(approve(id), question)
        },
        true,
    );
}

/// The gap left by the first fix: a quote of a message in another chat comes as
/// `external_reply` with no `reply_to_message`, and still is a quoting reply.
#[test]
fn a_reply_quoting_a_message_of_another_chat_is_refused() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| {
            let elsewhere = telegram::group_text(&format!("approve {id}"))["message"].clone();
            telegram::quoting_elsewhere(approve(id), elsewhere)
        },
        true,
    );
}

/// An inline bot's result (`@bot approve …` picked from its suggestions) is the bot's text.
#[test]
fn an_approve_sent_via_an_inline_bot_is_refused() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| telegram::via_bot(approve(id), telegram::another_bot()),
        true,
    );
}

/// A bot's own message never gets in, let alone answers.
#[test]
fn an_approve_from_a_bot_is_not_let_in() {
    only_a_typed_approve_approves(
        json!({}),
        |_, id| {
            let mut update = approve(id);
            update["message"]["from"] = telegram::another_bot();
            update
        },
        false,
    );
}

#[test]
fn a_call_from_the_http_api_waits_at_v1_approvals_and_runs_when_approved_there() {
    let home = guarded_home(json!({}));
    let gateway = home.start_gateway();
    let result = gateway.run_python(
        &home,
        "approval_client.py",
        &[&gateway.base, "gw-5ecret-token", "approve"],
    );
    let pending = &result["pending"][0];
    let ws = home.workspace().canonicalize().unwrap();
    assert_eq!(
        result,
        json!({
            "pending": [{
                "id": pending["id"],
                "agent": "main",
                "session": "agent:main:openai:bob",
                "tool": "exec",
                "summary": format!("run `touch made.txt && echo made` (sh -c) in {}", ws.display()),
                "risk": "guarded",
                "needs": ["exec:sh"],
                "sessionGrantOffered": true,
            }],
            "answer_status": 200,
            "content": "Done.",
        })
    );
    assert!(home.workspace().join("made.txt").exists());
}
