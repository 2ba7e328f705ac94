//! The transcriber against the mock's `/v1/audio/transcriptions`: the whole upload it sends,
//! the text it reads back, its errors for a refused key and a rate limit, and how
//! `tools.transcription` (or `providers.groq.apiKey` in its place) chooses the endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use nanocrab_provider::{Transcriber, TranscriptionError};
use nanocrab_testkit::{MockLlm, Transcription, TranscriptionRequest};
use pretty_assertions::assert_eq;

/// Four bytes of an Ogg page header: what is sent is compared, not decoded.
const AUDIO: &[u8] = b"OggS\0\x02voice";

fn config(json: &str) -> nanocrab_config::Config {
    nanocrab_config::parse(Path::new("config.json"), json, &|_| None).unwrap()
}

fn groq_at(mock: &MockLlm) -> Transcriber {
    let config = config(&format!(
        r#"{{"version": 1, "tools": {{"transcription": {{
            "provider": "groq", "apiBase": "{}", "apiKey": "gsk_secret123",
            "model": "whisper-large-v3-turbo", "language": "en"}}}}}}"#,
        mock.openai_base()
    ));
    Transcriber::from_config(&config, &|_| None)
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn a_voice_note_is_uploaded_whole_and_its_text_read_back() {
    let mock = MockLlm::start().await;
    mock.push_transcription(Transcription::text(" Meet me at noon. "));
    let text = groq_at(&mock)
        .transcribe("voice.ogg", Some("audio/ogg"), AUDIO.to_vec())
        .await
        .unwrap();
    assert_eq!(text, "Meet me at noon.");
    assert_eq!(
        mock.transcription_requests(),
        vec![TranscriptionRequest {
            authorization: Some("Bearer gsk_secret123".to_owned()),
            model: Some("whisper-large-v3-turbo".to_owned()),
            file_name: Some("voice.ogg".to_owned()),
            content_type: Some("audio/ogg".to_owned()),
            bytes: AUDIO.to_vec(),
            language: Some("en".to_owned()),
            response_format: Some("json".to_owned()),
            other: BTreeMap::new(),
        }]
    );
    // Nothing reached the model endpoints.
    assert_eq!(mock.requests(), Vec::new());
}

#[tokio::test]
async fn a_refused_key_says_where_the_key_came_from_and_never_shows_it() {
    let mock = MockLlm::start().await;
    mock.push_transcription(Transcription::Error {
        status: 401,
        message: "Invalid API Key gsk_secret123".to_owned(),
        kind: "invalid_request_error".to_owned(),
    });
    let err = groq_at(&mock)
        .transcribe("voice.ogg", Some("audio/ogg"), AUDIO.to_vec())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        TranscriptionError::Unauthorized { status: 401, .. }
    ));
    assert_eq!(
        err.to_string(),
        "groq: HTTP 401: Invalid API Key [redacted]. Is the key in tools.transcription.apiKey right?"
    );
}

#[tokio::test]
async fn a_rate_limit_is_its_own_error() {
    let mock = MockLlm::start().await;
    mock.push_transcription(Transcription::rate_limited());
    let err = groq_at(&mock)
        .transcribe("voice.ogg", None, AUDIO.to_vec())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "groq: HTTP 429: rate limited: Rate limit reached for model `whisper-large-v3` on seconds of audio per hour (ASPH): Limit 7200, Used 7190. Please try again in 25s"
    );
    assert!(matches!(err, TranscriptionError::RateLimited { .. }));
    // Without a type the file goes without one: the endpoint goes by the file name.
    let request = &mock.transcription_requests()[0];
    assert_eq!(
        (
            request.file_name.as_deref(),
            request.content_type.as_deref()
        ),
        (Some("voice.ogg"), None)
    );
}

#[tokio::test]
async fn audio_over_the_cap_is_not_sent() {
    let mock = MockLlm::start().await;
    let config = config(&format!(
        r#"{{"version": 1, "tools": {{"transcription": {{
            "apiBase": "{}/audio/transcriptions", "model": "whisper", "maxBytes": 4}}}}}}"#,
        mock.openai_base()
    ));
    let transcriber = Transcriber::from_config(&config, &|_| None)
        .unwrap()
        .unwrap();
    assert_eq!(
        transcriber.describe(),
        format!(
            "custom whisper at {}/audio/transcriptions",
            mock.openai_base()
        )
    );
    let err = transcriber
        .transcribe("voice.ogg", None, AUDIO.to_vec())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the audio is 11 bytes, more than tools.transcription.maxBytes (4)"
    );
    assert_eq!(mock.transcription_requests(), Vec::new());
}

#[test]
fn a_groq_key_in_providers_switches_on_groq_as_in_nanobot() {
    let groq = config(r#"{"version": 1, "providers": {"groq": {"apiKey": "gsk_x"}}}"#);
    let transcriber = Transcriber::from_config(&groq, &|_| None).unwrap().unwrap();
    assert_eq!(
        transcriber.describe(),
        "groq whisper-large-v3 at https://api.groq.com/openai/v1/audio/transcriptions"
    );
    // Switched off, or no Groq key (the environment alone does not send audio anywhere).
    let off = config(
        r#"{"version": 1, "providers": {"groq": {"apiKey": "gsk_x"}},
            "tools": {"transcription": {"enabled": false}}}"#,
    );
    assert!(Transcriber::from_config(&off, &|_| None).unwrap().is_none());
    let none = config(r#"{"version": 1}"#);
    let env = |var: &str| (var == "GROQ_API_KEY").then(|| "gsk_env".to_owned());
    assert!(Transcriber::from_config(&none, &env).unwrap().is_none());
}

#[test]
fn openai_takes_its_key_from_the_environment_or_says_what_to_set() {
    let openai = config(r#"{"version": 1, "tools": {"transcription": {}}}"#);
    let env = |var: &str| (var == "OPENAI_API_KEY").then(|| "sk-env".to_owned());
    let transcriber = Transcriber::from_config(&openai, &env).unwrap().unwrap();
    assert_eq!(
        transcriber.describe(),
        "openai whisper-1 at https://api.openai.com/v1/audio/transcriptions"
    );
    let err = Transcriber::from_config(&openai, &|_| None).err().unwrap();
    assert_eq!(
        err.to_string(),
        "`tools.transcription.apiKey`: openai needs an API key: set it here, in providers.openai.apiKey, or in OPENAI_API_KEY"
    );
    let custom = config(
        r#"{"version": 1, "tools": {"transcription": {"provider": "speaches"}},
            "providers": {"speaches": {"apiBase": "http://127.0.0.1:8000/v1"}}}"#,
    );
    let err = Transcriber::from_config(&custom, &|_| None).err().unwrap();
    assert_eq!(
        err.to_string(),
        "`tools.transcription.model`: say which speech-to-text model of speaches to use (e.g. whisper-1, whisper-large-v3-turbo)"
    );
}
