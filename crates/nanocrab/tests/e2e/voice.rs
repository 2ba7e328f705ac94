//! Voice messages through the real `nanocrab gateway`: a Telegram voice note from the fake
//! Bot API is downloaded, transcribed by the mock's `/v1/audio/transcriptions`, and reaches
//! the model as a transcript; without a transcriber, or when it fails, the chat is told why
//! and the turn still runs.

use nanocrab_testkit::telegram::{self, FakeTelegram};
use nanocrab_testkit::{Reply, Transcription, TranscriptionRequest, VOICE_NOTE_OGG};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::gateway::{OWNER, TOKEN, telegram_home};
use crate::harness::{Home, tool_names};

/// Groq's key in this test's config: it must reach only the transcription endpoint.
const GROQ_KEY: &str = "gsk_e2e_voice_5ecret";

/// The recorded private chat's voice note `voice-1`, served by `fake` as Telegram serves
/// a voice note's file.
fn send_voice_note(fake: &FakeTelegram) {
    fake.add_file("voice-1", "voice/file_7.oga", VOICE_NOTE_OGG.to_vec());
    fake.push_update(telegram::private_voice(
        "voice-1",
        2,
        VOICE_NOTE_OGG.len() as u64,
    ));
}

/// The text messages the fake Telegram sent, in order.
fn sent_texts(fake: &FakeTelegram) -> Vec<String> {
    fake.sent_messages().into_iter().map(|m| m.text).collect()
}

fn with_transcription(home: &Home, transcription: Value) {
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(home.config_path()).unwrap()).unwrap();
    config["tools"] = json!({ "transcription": transcription });
    home.write_config(config);
}

#[test]
fn a_telegram_voice_note_is_transcribed_into_the_turn_and_answered() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = telegram_home(&fake, json!({}));
    with_transcription(
        &home,
        json!({
            "provider": "groq",
            "apiBase": home.mock.openai_base(),
            "apiKey": GROQ_KEY,
            "model": "whisper-large-v3-turbo",
            "language": "en",
        }),
    );
    home.mock
        .push_transcription(Transcription::text("Meet me at noon."));
    home.mock.push(Reply::text("Noon it is."));
    send_voice_note(&fake);

    let mut gateway = home.start_gateway();
    gateway.eventually("the answer", |_| {
        (!fake.sent_messages().is_empty()).then_some(())
    });
    assert_eq!(sent_texts(&fake), ["Noon it is."]);
    let name = format!("{OWNER}-6557-voice.ogg");
    assert_eq!(
        home.mock.transcription_requests(),
        vec![TranscriptionRequest {
            authorization: Some(format!("Bearer {GROQ_KEY}")),
            model: Some("whisper-large-v3-turbo".to_owned()),
            file_name: Some(name.clone()),
            content_type: Some("audio/ogg".to_owned()),
            bytes: VOICE_NOTE_OGG.to_vec(),
            language: Some("en".to_owned()),
            response_format: Some("json".to_owned()),
            other: Default::default(),
        }]
    );
    // The whole request the model got, but for the system prompt (paths and dates of this
    // run) and the tools' schemas (their own snapshots), named instead.
    let requests = home.requests();
    assert_eq!(requests.len(), 1);
    let mut body = requests[0].body.clone();
    assert_eq!(body["messages"][0]["role"], "system");
    body["messages"][0]["content"] = json!("(the system prompt)");
    body["tools"] = json!(tool_names(&body));
    insta::assert_json_snapshot!(body);
    assert_eq!(
        std::fs::read(home.workspace().join("inbox").join(&name)).unwrap(),
        VOICE_NOTE_OGG
    );
    // `log` checks that no part of a key (`5ecret`) is in it.
    let log = gateway.log();
    assert!(
        log.contains("voice messages: transcribed by groq whisper-large-v3-turbo at"),
        "{log}"
    );
    assert!(gateway.terminate().success());
}

#[test]
fn without_a_transcriber_the_chat_hears_what_to_configure_and_the_turn_is_not_lost() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = telegram_home(&fake, json!({}));
    home.mock
        .push(Reply::text("I can't hear audio yet; please type it."));
    send_voice_note(&fake);

    let mut gateway = home.start_gateway();
    gateway.eventually("the note and the answer", |_| {
        (fake.sent_messages().len() == 2).then_some(())
    });
    let texts = sent_texts(&fake);
    assert!(
        texts[0].starts_with("I got your voice message, but I can't listen to audio: no transcription is set up. Set <code>tools.transcription</code> in config.json"),
        "{texts:?}"
    );
    assert_eq!(texts[1], "I can't hear audio yet; please type it.");
    let body = &home.requests()[0].body;
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap()["content"],
        format!(
            "[a voice message was attached (saved as inbox/{OWNER}-6557-voice.ogg (audio/ogg, 2881 bytes)); it was not transcribed: no transcriber is configured]"
        )
    );
    assert!(gateway.terminate().success());
}

#[test]
fn a_refused_transcription_key_is_explained_and_the_voice_note_still_reaches_the_turn() {
    let fake = FakeTelegram::spawn(TOKEN);
    let home = telegram_home(&fake, json!({}));
    with_transcription(
        &home,
        json!({"provider": "groq", "apiBase": home.mock.openai_base(), "apiKey": GROQ_KEY}),
    );
    home.mock.push_transcription(Transcription::unauthorized());
    home.mock
        .push(Reply::text("Your voice note did not come through."));
    send_voice_note(&fake);

    let mut gateway = home.start_gateway();
    gateway.eventually("the note and the answer", |_| {
        (fake.sent_messages().len() == 2).then_some(())
    });
    assert_eq!(
        sent_texts(&fake),
        [
            "I got your voice message, but couldn't transcribe it: the transcription service refused nanocrab's API key. If it matters, please send it again or write it.",
            "Your voice note did not come through.",
        ]
    );
    let body = &home.requests()[0].body;
    assert_eq!(
        body["messages"].as_array().unwrap().last().unwrap()["content"],
        format!(
            "[a voice message was attached (saved as inbox/{OWNER}-6557-voice.ogg (audio/ogg, 2881 bytes)); it could not be transcribed: the transcription service refused nanocrab's API key]"
        )
    );
    let log = gateway.log();
    assert!(
        log.contains("groq: HTTP 401: Incorrect API key provided"),
        "{log}"
    );
    assert!(gateway.terminate().success());
}
