use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use eventsource_stream::Eventsource as _;
use futures::{Stream, StreamExt as _};
use serde_json::Value;

use crate::error::{ProviderError, redact, status_hint};
use crate::prepare::prepare;
use crate::profile::ModelProfile;
use crate::provider::{ChatRequest, ChatResponse, DeltaSink, LlmProvider, ProviderDelta};
use nanocrab_config::http::Timeouts;
use nanocrab_schema::ContentBlock;

/// How hard to try before giving up on a retriable failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Exponential backoff with full jitter, unless the provider said when to come back.
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay.max(Duration::from_secs(60)));
        }
        let exp = self
            .base_delay
            .saturating_mul(1 << retry.min(16))
            .min(self.max_delay);
        let nanos = exp.as_nanos() as u64;
        // Jitter in [exp/2, exp): enough to spread clients out without a random crate.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or_default();
        Duration::from_nanos(nanos / 2 + seed % (nanos / 2).max(1))
    }
}

/// Where and how to reach one configured provider.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub provider: String,
    pub api_base: String,
    pub api_key: Option<String>,
    pub api_key_env: Option<&'static str>,
    pub extra_headers: Vec<(String, String)>,
    pub retry: RetryPolicy,
    /// What the model accepts and the provider's quirks.
    pub profile: ModelProfile,
}

// The key must never reach a log or an error message through Debug.
impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("api_base", &self.api_base)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// One provider wire protocol: how to ask, and how to read the streamed answer.
pub(crate) trait WireFormat: Send + Sync + 'static {
    /// Appended to the api base.
    fn path(&self, model: &str) -> String;
    fn auth_headers(&self, api_key: Option<&str>) -> Vec<(&'static str, String)>;
    /// The JSON request body, for a request already fitted to the model by [`prepare`].
    fn body(
        &self,
        request: &ChatRequest<'_>,
        profile: &ModelProfile,
    ) -> serde_json::Result<Vec<u8>>;
    fn new_stream(&self, provider: &str) -> Box<dyn StreamState>;
    /// A whole answer as the SSE events (name, data) its stream would have carried: some
    /// compatible servers ignore `"stream": true` and send one JSON body, and it is then read
    /// by the same code as a stream.
    fn whole_as_events(&self, body: Value) -> Vec<(String, String)>;
    /// What an error body says.
    fn error_info(&self, body: &Value) -> ErrorInfo;

    /// [`WireFormat::whole_as_events`] framed as the SSE body a stream would have been.
    fn whole_as_sse(&self, body: Value) -> bytes::Bytes {
        let framed: String = self
            .whole_as_events(body)
            .into_iter()
            .map(|(event, data)| format!("event: {event}\ndata: {data}\n\n"))
            .collect();
        bytes::Bytes::from(framed)
    }
}

/// `Authorization: Bearer <key>`, as OpenAI and every compatible server take it; nothing for
/// a local server without a key.
pub(crate) fn bearer(api_key: Option<&str>) -> Vec<(&'static str, String)> {
    api_key
        .map(|key| vec![("authorization", format!("Bearer {key}"))])
        .unwrap_or_default()
}

/// The useful parts of a provider's error body.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ErrorInfo {
    pub message: Option<String>,
    /// The provider's error type or code (`overloaded_error`, `insufficient_quota`,
    /// `RESOURCE_EXHAUSTED`).
    pub kind: Option<String>,
    /// When the body itself says when to come back (Google's `RetryInfo.retryDelay`).
    pub retry_after: Option<Duration>,
}

/// Reads one streamed response, event by event.
pub(crate) trait StreamState: Send {
    /// Handles one SSE event; pushes deltas to show as they come.
    fn event(
        &mut self,
        event: &str,
        data: &str,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<(), ProviderError>;
    /// The whole response once the stream ended, or `None` when it ended before the provider
    /// said why it stopped (a connection cut mid-answer): never taken for a complete answer.
    fn finish(
        self: Box<Self>,
        deltas: &mut Vec<ProviderDelta>,
    ) -> Result<Option<ChatResponse>, ProviderError>;
}

/// Feeds an SSE byte stream through a [`StreamState`]. Live responses and recorded fixtures
/// take this same path.
pub(crate) async fn read_stream<S, E>(
    provider: &str,
    bytes: S,
    mut state: Box<dyn StreamState>,
    on_delta: DeltaSink<'_>,
) -> Result<ChatResponse, ProviderError>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    // Gemini ends its last event with a single line break, and the SSE spec drops an event
    // that no blank line terminates: close the stream with one so the last event counts.
    let terminator = futures::stream::iter([Ok(bytes::Bytes::from_static(b"\n\n"))]);
    let mut events = bytes.chain(terminator).eventsource();
    let mut deltas = Vec::new();
    while let Some(event) = events.next().await {
        let event = event.map_err(|err| ProviderError::Stream {
            provider: provider.to_owned(),
            detail: err.to_string(),
        })?;
        state.event(&event.event, &event.data, &mut deltas)?;
        for delta in deltas.drain(..) {
            on_delta(delta);
        }
    }
    let response = state.finish(&mut deltas)?;
    for delta in deltas.drain(..) {
        on_delta(delta);
    }
    response.ok_or_else(|| ProviderError::Stream {
        provider: provider.to_owned(),
        detail: "the stream ended before the answer was complete (no stop reason)".to_owned(),
    })
}

/// A provider over HTTP + SSE, generic over its wire format.
pub(crate) struct HttpProvider<W> {
    endpoint: Endpoint,
    wire: W,
    client: OnceLock<reqwest::Client>,
}

impl<W: WireFormat> HttpProvider<W> {
    pub fn new(endpoint: Endpoint, wire: W) -> Self {
        Self {
            endpoint,
            wire,
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> Result<&reqwest::Client, ProviderError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        // No limit on the whole answer: a long stream is fine while it keeps talking.
        let client = nanocrab_config::http::client_builder(Timeouts {
            connect: Duration::from_secs(10),
            read: Some(Duration::from_secs(300)),
            total: None,
        })
        .build()
        .map_err(|err| ProviderError::Client {
            provider: self.endpoint.provider.clone(),
            detail: err.to_string(),
        })?;
        Ok(self.client.get_or_init(|| client))
    }

    async fn attempt(
        &self,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let endpoint = &self.endpoint;
        let url = format!("{}{}", endpoint.api_base, self.wire.path(&request.model));
        let body = self
            .wire
            .body(
                &prepare(request, &endpoint.profile, &endpoint.provider),
                &endpoint.profile,
            )
            .map_err(|err| ProviderError::Client {
                provider: endpoint.provider.clone(),
                detail: format!("cannot encode the request: {err}"),
            })?;
        let mut builder = self
            .client()?
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in self.wire.auth_headers(endpoint.api_key.as_deref()) {
            builder = builder.header(name, value);
        }
        for (name, value) in &endpoint.extra_headers {
            builder = builder.header(name, value);
        }
        let response = builder.send().await.map_err(|err| ProviderError::Connect {
            provider: endpoint.provider.clone(),
            url: url.clone(),
            detail: redact(&root_cause(&err), endpoint.api_key.as_deref()),
            attempts: 1,
        })?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let header_retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|secs| secs.is_finite() && *secs >= 0.0)
                .map(Duration::from_secs_f64);
            let text = response.text().await.unwrap_or_default();
            return Err(status_error(
                &self.wire,
                endpoint,
                status,
                &text,
                header_retry_after,
            ));
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let stream = self.wire.new_stream(&endpoint.provider);
        let mut answer = if is_json {
            let whole: Value = response.json().await.map_err(|err| ProviderError::Stream {
                provider: endpoint.provider.clone(),
                detail: format!("unreadable response body ({})", root_cause(&err)),
            })?;
            let body = futures::stream::iter([Ok::<_, std::convert::Infallible>(
                self.wire.whole_as_sse(whole),
            )]);
            read_stream(&endpoint.provider, body, stream, on_delta).await?
        } else {
            read_stream(
                &endpoint.provider,
                response.bytes_stream(),
                stream,
                on_delta,
            )
            .await?
        };
        // A signature is only valid for the provider that made it: remember whose it is.
        for block in &mut answer.content {
            match block {
                ContentBlock::Thinking {
                    signature: Some(_),
                    origin,
                    ..
                }
                | ContentBlock::RedactedThinking { origin, .. } => {
                    *origin = Some(endpoint.provider.clone());
                }
                ContentBlock::Thinking {
                    signature: None, ..
                }
                | ContentBlock::Text { .. }
                | ContentBlock::Image(_)
                | ContentBlock::ToolUse(_)
                | ContentBlock::ToolResult(_) => {}
            }
        }
        Ok(answer)
    }
}

/// The error an HTTP error answer becomes: the provider's own message (its key redacted), its
/// error kind, what to do, and when to come back if it said.
pub(crate) fn status_error(
    wire: &dyn WireFormat,
    endpoint: &Endpoint,
    status: u16,
    body: &str,
    header_retry_after: Option<Duration>,
) -> ProviderError {
    let info = serde_json::from_str::<Value>(body)
        .map(|body| wire.error_info(&body))
        .unwrap_or_default();
    let message = info
        .message
        .unwrap_or_else(|| body.chars().take(300).collect());
    ProviderError::Status {
        provider: endpoint.provider.clone(),
        status,
        message: redact(
            message.trim().trim_end_matches('.'),
            endpoint.api_key.as_deref(),
        ),
        hint: status_hint(
            &endpoint.provider,
            endpoint.api_key_env,
            status,
            info.kind.as_deref(),
        ),
        kind: info.kind,
        attempts: 1,
        retry_after: header_retry_after.or(info.retry_after),
    }
}

/// reqwest's Display says only "error sending request"; the cause says why.
fn root_cause(err: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = err;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

#[async_trait]
impl<W: WireFormat> LlmProvider for HttpProvider<W> {
    fn name(&self) -> &str {
        &self.endpoint.provider
    }

    async fn chat(
        &self,
        request: &ChatRequest<'_>,
        on_delta: DeltaSink<'_>,
    ) -> Result<ChatResponse, ProviderError> {
        let policy = self.endpoint.retry;
        let mut attempt = 0;
        loop {
            attempt += 1;
            // Once text reached the user a retry would repeat it: only retry before that.
            let mut emitted = false;
            let result = self
                .attempt(request, &mut |delta| {
                    emitted = true;
                    on_delta(delta);
                })
                .await;
            match result {
                Ok(response) => return Ok(response),
                Err(err) if err.is_retriable() && !emitted && attempt <= policy.max_retries => {
                    let delay = policy.delay(attempt - 1, err.retry_after());
                    // The user is told through the delta sink, in one line; the log keeps
                    // the whole error for whoever asks for it.
                    tracing::debug!(
                        "{}: attempt {attempt} failed ({err}); retrying in {delay:?}",
                        self.endpoint.provider
                    );
                    on_delta(ProviderDelta::Retry(crate::provider::RetryNotice {
                        provider: self.endpoint.provider.clone(),
                        reason: err.brief(),
                        delay,
                        attempt: attempt + 1,
                        attempts: policy.max_retries + 1,
                    }));
                    tokio::time::sleep(delay).await;
                }
                Err(mut err) => {
                    err.set_attempts(attempt);
                    return Err(err);
                }
            }
        }
    }
}

/// Parses tool-call arguments, repairing slightly broken JSON (trailing commas, unclosed
/// braces or strings). What cannot be repaired is kept as a JSON string so the tool reports
/// a clear error to the model instead of the call being dropped.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    if let Ok(value) = serde_json::from_str::<Value>(raw) {
        return value;
    }
    match jsonrepair::repair_json(raw, &jsonrepair::Options::default()) {
        Ok(repaired) => serde_json::from_str::<Value>(&repaired)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::String(raw.to_owned())),
        Err(_) => Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn broken_arguments_are_repaired() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(r#"{"a": 1,}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(r#"{"a": "x"#), json!({"a": "x"}));
        assert_eq!(parse_arguments(r#"{"a": {"b": 2}"#), json!({"a": {"b": 2}}));
    }

    #[test]
    fn backoff_grows_and_honours_retry_after() {
        let policy = RetryPolicy::default();
        let first = policy.delay(0, None);
        assert!(first >= Duration::from_millis(500) && first < Duration::from_secs(1));
        let third = policy.delay(2, None);
        assert!(third >= Duration::from_secs(2) && third < Duration::from_secs(4));
        assert_eq!(policy.delay(0, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(policy.delay(5, None) <= policy.max_delay, true);
    }
}
