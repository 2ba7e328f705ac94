//! `nanocrab agent -m ... --image PATH`: images go to models that can see them, in each
//! provider's own format, are kept beside the transcript, and become a note for a model that
//! cannot see.

use nanocrab_testkit::Reply;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Home, SECRET_KEY, Wire};

/// Not a real picture: providers are mocked, and only the bytes' journey matters.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot-really-pixels";
const PNG_BASE64: &str = "iVBORw0KGgpub3QtcmVhbGx5LXBpeGVscw==";

fn ask_with_image(home: &Home, message: &str) -> String {
    let image = home.workspace().join("photo.png");
    std::fs::write(&image, PNG).unwrap();
    let run = home.run(
        home.nanocrab()
            .args(["agent", "-m", message, "--image"])
            .arg(&image),
    );
    let stderr = run.stderr;
    assert!(run.success, "{stderr}");
    run.stdout
}

#[test]
fn an_image_reaches_a_vision_model_and_is_sent_again_from_its_file_next_turn() {
    let home = Home::new(Wire::Anthropic);
    home.mock.push(Reply::text("A crab."));
    home.mock.push(Reply::text("Red."));

    assert_eq!(ask_with_image(&home, "what is this?"), "A crab.\n");
    assert_eq!(home.ask("what colour?"), "Red.\n");

    let requests = home.requests();
    let image = json!({"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": PNG_BASE64}});
    // The newest block is also Anthropic's moving cache breakpoint.
    let mut marked = image.clone();
    marked["cache_control"] = json!({"type": "ephemeral"});
    assert_eq!(
        requests[0].body["messages"][0]["content"],
        json!([{"type": "text", "text": "what is this?"}, marked])
    );
    assert_eq!(requests[1].body["messages"][0]["content"][1], image);

    // The transcript keeps a reference; the bytes live once under sessions/media/.
    let sessions = home.home().join("sessions");
    let transcript = home.transcript();
    assert!(!transcript.contains(PNG_BASE64), "{transcript}");
    let media: Vec<_> = std::fs::read_dir(sessions.join("media"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(media.len(), 1);
    assert_eq!(std::fs::read(&media[0]).unwrap(), PNG);
    let name = media[0].file_name().unwrap().to_str().unwrap();
    assert!(
        transcript.contains(&format!(r#""file":"media/{name}""#)),
        "{transcript}"
    );
}

#[test]
fn each_protocol_gets_the_image_in_its_own_format() {
    let home = Home::new(Wire::OpenAi);
    home.mock.push(Reply::text("ok"));
    ask_with_image(&home, "look");
    assert_eq!(
        home.requests()[0].body["messages"][1]["content"][1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_BASE64}")}})
    );

    let home = Home::new(Wire::Gemini);
    home.mock.push(Reply::text("ok"));
    ask_with_image(&home, "look");
    assert_eq!(
        home.requests()[0].body["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": PNG_BASE64}})
    );
}

#[test]
fn a_model_that_cannot_see_gets_a_note_instead() {
    let home = Home::new(Wire::OpenAi);
    home.write_config(json!({
        "version": 1,
        "agents": {"defaults": {"model": "deepseek/deepseek-chat", "workspace": home.workspace()}},
        "providers": {"deepseek": {"apiKey": SECRET_KEY, "apiBase": home.mock.openai_base()}},
    }));
    home.mock
        .push(Reply::text("I can't see images with this model."));
    ask_with_image(&home, "what is this?");
    let body = &home.requests()[0].body;
    assert_eq!(
        body["messages"][1]["content"],
        "what is this?\n\n[The user sent an image (image/png, 1 KB) that was not passed on: deepseek/deepseek-chat does not accept images. Tell the user so. If the model does accept images, the user can set providers.deepseek.models.deepseek-chat.vision to true in config.json.]"
    );
}

#[test]
fn a_file_that_is_not_an_image_is_refused_before_the_model_is_called() {
    let home = Home::new(Wire::Anthropic);
    let notes = home.workspace().join("notes.txt");
    std::fs::write(&notes, "text").unwrap();
    let run = home.run(
        home.nanocrab()
            .args(["agent", "-m", "look", "--image"])
            .arg(&notes),
    );
    assert!(!run.success);
    let stderr = run.stderr;
    assert!(
        stderr.contains("notes.txt: not a PNG, JPEG, GIF or WebP file"),
        "{stderr}"
    );
    assert!(home.requests().is_empty());
}
