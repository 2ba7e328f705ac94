//! The browser's only way out: an HTTP proxy on loopback that Chromium is started with, for
//! every request it makes (pages, redirects, subresources, scripts' requests, WebSockets).
//! Each request's host is resolved here and checked like `web_fetch`'s (`nanocrab-web`), and
//! the proxy connects only to the checked addresses, so a name cannot resolve to another
//! address between the check and the connection. A refused request answers 403 and is kept
//! for the tool to report.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nanocrab_web::{FetchError, Fetcher, capability_target};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use url::Url;

/// The most a request's head (request line and headers) may take.
const MAX_HEAD: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection the proxy refused: the host as `web_fetch`'s grants name it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub host: String,
    pub reason: String,
}

/// The refusals so far, for the tool to report after each action.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<Vec<Refusal>>>);

impl Refusals {
    fn push(&self, refusal: Refusal) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(refusal);
    }

    /// The refusals since the last call.
    pub fn take(&self) -> Vec<Refusal> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// A running proxy; dropping it stops accepting connections.
pub struct CheckingProxy {
    address: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for CheckingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl CheckingProxy {
    /// Listens on a free port of 127.0.0.1; `checks` resolves and checks each host.
    pub async fn start(checks: Arc<Fetcher>, refusals: Refusals) -> std::io::Result<Self> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let checks = Arc::clone(&checks);
                let refusals = refusals.clone();
                tokio::spawn(async move {
                    if let Err(err) = serve(client, &checks, &refusals).await {
                        tracing::debug!("browser proxy connection ended: {err}");
                    }
                });
            }
        });
        Ok(Self { address, accept })
    }

    /// `http://127.0.0.1:<port>`, for `--proxy-server`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

/// What a client asked the proxy for.
enum Request {
    /// `CONNECT host:port`: a tunnel (HTTPS, secure WebSockets).
    Tunnel(Url),
    /// A plain HTTP request in absolute form, to be sent on in origin form.
    Forward { url: Url, head: Vec<u8> },
}

async fn serve(
    mut client: TcpStream,
    checks: &Fetcher,
    refusals: &Refusals,
) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut client).await?;
    let request = match parse(&head) {
        Ok(request) => request,
        Err(reason) => return answer(&mut client, "400 Bad Request", &format!("{reason}\n")).await,
    };
    let url = match &request {
        Request::Tunnel(url) | Request::Forward { url, .. } => url.clone(),
    };
    let addresses = match checks.addresses(&url).await {
        Ok((addresses, _)) => addresses,
        Err(err @ FetchError::Private { .. }) => {
            let reason = refusal_reason(&err);
            refusals.push(Refusal {
                host: capability_target(&url).unwrap_or_default(),
                reason: reason.clone(),
            });
            let body = format!("nanocrab refused this request: {reason}\n");
            return answer(&mut client, "403 Forbidden", &body).await;
        }
        // Not a decision of the rules (a name that does not resolve): the page sees a
        // failure as it would without the proxy.
        Err(err) => {
            return answer(&mut client, "502 Bad Gateway", &format!("{err}\n")).await;
        }
    };
    let mut upstream = match connect(&addresses).await {
        Ok(upstream) => upstream,
        Err(err) => {
            let body = format!("cannot connect to {url}: {err}\n");
            return answer(&mut client, "502 Bad Gateway", &body).await;
        }
    };
    match request {
        Request::Tunnel(_) => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
        }
        Request::Forward { head, .. } => upstream.write_all(&head).await?,
    }
    upstream.write_all(&rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The request's head, and what the client sent after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_owned())?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("not an HTTP request: {request_line:?}"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let url = Url::parse(&format!("https://{target}/"))
            .map_err(|err| format!("CONNECT {target}: {err}"))?;
        return Ok(Request::Tunnel(url));
    }
    let url = Url::parse(target).map_err(|err| format!("{target}: {err}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{target}: only http:// goes through as a plain request"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a URL with credentials is not sent on".to_owned());
    }
    let mut origin_form = url.path().to_owned();
    if let Some(query) = url.query() {
        origin_form.push('?');
        origin_form.push_str(query);
    }
    let mut forwarded = format!("{method} {origin_form} {version}\r\n");
    for line in lines.filter(|line| !line.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        // Hop-by-hop headers stay here; one request per upstream connection, so that a
        // connection never carries a request for another host to the one checked.
        if [
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
        ]
        .iter()
        .any(|hop| name.eq_ignore_ascii_case(hop))
        {
            continue;
        }
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        url,
        head: forwarded.into_bytes(),
    })
}

/// Why `web_fetch`'s checks refused the host, in the browser's words.
pub(crate) fn refusal_reason(err: &FetchError) -> String {
    match err {
        FetchError::Private {
            host,
            address,
            kind,
        } => {
            let what = if host.trim_matches(['[', ']']) == address.to_string() {
                format!("{host} is {kind}")
            } else {
                format!("{host} resolves to {address}, {kind}")
            };
            format!(
                "{what}: the browser reaches only public addresses unless the host is in \
                 tools.web.allowPrivate"
            )
        }
        FetchError::BadUrl(..)
        | FetchError::Scheme(_)
        | FetchError::Credentials(_)
        | FetchError::Resolve { .. }
        | FetchError::NoAddress(_)
        | FetchError::TimedOut(_)
        | FetchError::TooManyRedirects { .. }
        | FetchError::RedirectElsewhere { .. }
        | FetchError::BadRedirect { .. }
        | FetchError::Transport { .. }
        | FetchError::Status { .. }
        | FetchError::Encoding { .. } => err.to_string(),
    }
}

async fn connect(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for address in addresses {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(err)) => last = err,
            Err(_) => last = std::io::ErrorKind::TimedOut.into(),
        }
    }
    Err(last)
}

async fn answer(client: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}
