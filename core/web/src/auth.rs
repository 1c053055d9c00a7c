//! Who may do what: tokens (from a file), who a request comes from (a bearer token, or a
//! sign-in session kept in the store), whether its `Host` is one this view answers, whether a
//! change came from this site, and where a form may send the browser back to. Nothing here
//! renders a page: a refusal is a [`Refusal`], which the caller turns into one.

use bytes::Bytes;
use http::{Request, header};
use mcp_tasks::admin::{Admin, AdminError, Session};
use sha2::{Digest, Sha256};

use crate::{WebOptions, params};

/// The sign-in cookie's name.
pub(crate) const COOKIE: &str = "mcp_tasks_web";

/// A token that may act, and whose it is.
#[derive(Clone)]
pub struct Token {
    /// The operator's name, as a cancel's history entry records it.
    pub name: String,
    /// The SHA-256 of the secret: compared digest to digest, and the secret itself is not kept.
    digest: [u8; 32],
    /// The principals whose tasks it may see and change (`None`: all).
    pub principals: Option<Vec<String>>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token").field("name", &self.name).field("principals", &self.principals).finish_non_exhaustive()
    }
}

impl Token {
    /// A token `secret` for operator `name`, limited to `principals` when given.
    pub fn new(name: impl Into<String>, secret: &str, principals: Option<Vec<String>>) -> Self {
        Self { name: name.into(), digest: digest(secret.as_bytes()), principals }
    }

    fn matches(&self, secret: &str) -> bool {
        same_digest(&self.digest, &digest(secret.as_bytes()))
    }
}

/// Equal digests in constant time: how long the comparison takes says nothing of the secret.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Why a token file was refused.
#[derive(Debug, thiserror::Error)]
#[error("token file line {line}: {reason}")]
pub struct TokenError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// Reads a token file: one token a line, `NAME:SECRET` or `NAME:SECRET:PRINCIPAL,PRINCIPAL`
/// (limited to those principals); blank lines and lines starting with `#` are skipped. A secret
/// shorter than 16 characters is refused.
pub fn parse_tokens(text: &str) -> Result<Vec<Token>, TokenError> {
    let mut tokens = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |reason: &str| TokenError { line: index + 1, reason: reason.to_owned() };
        let mut parts = line.splitn(3, ':');
        let name = parts.next().unwrap_or_default().trim();
        let secret = parts.next().ok_or_else(|| fail("expected NAME:SECRET[:PRINCIPALS]"))?.trim();
        if name.is_empty() {
            return Err(fail("the name is empty"));
        }
        if secret.chars().count() < 16 {
            return Err(fail("the secret is shorter than 16 characters"));
        }
        let principals = parts
            .next()
            .map(|list| list.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect());
        tokens.push(Token::new(name, secret, principals));
    }
    Ok(tokens)
}

/// Who a request comes from.
#[derive(Clone, Debug)]
pub(crate) struct Viewer {
    /// The operator's name (`None`: an anonymous reader).
    pub(crate) name: Option<String>,
    /// The principals they may see (`None`: all).
    pub(crate) principals: Option<Vec<String>>,
    /// True when the token came in an `Authorization` header (a script), not a session cookie.
    pub(crate) by_header: bool,
}

impl Viewer {
    pub(crate) fn anonymous() -> Self {
        Self { name: None, principals: None, by_header: false }
    }

    /// Who this is, for counting the `/changes` requests one browser holds.
    pub(crate) fn key(&self) -> String {
        self.name.clone().unwrap_or_default()
    }
}

/// Why a request is not answered as asked.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// Reading needs a token: the sign-in form, saying so.
    SignIn,
    /// A change needs a token.
    NoToken,
    /// The view is read-only.
    ReadOnly,
    /// A state-changing request came from another site.
    CrossSite,
    /// The request named a `Host` this view does not answer (DNS rebinding, or a proxy the
    /// operator has not named): the host it named.
    Host(String),
    /// The store could not say who the session is.
    Store(AdminError),
}

/// The token holder a request comes from: its `Authorization: Bearer` header, else its
/// session cookie (a session the store holds, unexpired, whose token is still in the file).
pub(crate) async fn viewer(
    options: &WebOptions,
    admin: &Admin,
    request: &Request<Bytes>,
) -> Result<Option<Viewer>, AdminError> {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(secret) = bearer {
        let token = options.tokens.iter().find(|t| t.matches(secret));
        return Ok(token.map(|t| Viewer {
            name: Some(t.name.clone()),
            principals: t.principals.clone(),
            by_header: true,
        }));
    }
    let Some(key) = session_key(request) else { return Ok(None) };
    let Some(session) = admin.session(key, now_ms()).await? else { return Ok(None) };
    let token = options.tokens.iter().find(|t| same_digest(&t.digest, &session.token));
    Ok(token.map(|t| Viewer { name: Some(t.name.clone()), principals: t.principals.clone(), by_header: false }))
}

fn now_ms() -> u64 {
    mcp_tasks::clock::Clock::now_ms(&mcp_tasks::clock::SystemClock)
}

/// The store's key of the session the request's cookie names: the SHA-256 of its id.
fn session_key(request: &Request<Bytes>) -> Option<[u8; 32]> {
    let id = request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())?;
    // An id is 64 hex digits; anything else is no session (and costs the store nothing).
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| digest(id.as_bytes()))
}

/// Checks `secret` against the tokens and, when it is one, starts a session for it: answers
/// the cookie's value (a random id) and the operator's name, `None` for a wrong token.
pub(crate) async fn sign_in(
    options: &WebOptions,
    admin: &Admin,
    secret: &str,
) -> Result<Option<(String, String)>, AdminError> {
    let Some(token) = options.tokens.iter().find(|t| t.matches(secret)) else { return Ok(None) };
    let mut random = [0u8; 32];
    getrandom::fill(&mut random)
        .map_err(|e| AdminError::InvalidArgument(format!("no randomness for a session id: {e}")))?;
    let id: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let now = now_ms();
    let ttl = u64::try_from(options.session_ttl.as_millis()).unwrap_or(u64::MAX);
    let session = Session { operator: token.name.clone(), token: token.digest, expires_at_ms: now.saturating_add(ttl) };
    admin.start_session(digest(id.as_bytes()), &session, now).await?;
    Ok(Some((id, token.name.clone())))
}

/// Ends the session the request's cookie names, on every process over the store; answers whose
/// it was (`None` when there was none).
pub(crate) async fn sign_out(admin: &Admin, request: &Request<Bytes>) -> Result<Option<String>, AdminError> {
    let Some(key) = session_key(request) else { return Ok(None) };
    let session = admin.session(key, now_ms()).await?;
    admin.end_session(key).await?;
    Ok(session.map(|s| s.operator))
}

/// The `Set-Cookie` value of a session (`id`), or of its removal (`None`): `HttpOnly`,
/// `SameSite=Strict`, scoped to the view's path, `Secure` when the request came over HTTPS.
pub(crate) fn cookie(options: &WebOptions, request: &Request<Bytes>, id: Option<&str>) -> String {
    let path = if options.prefix.is_empty() { "/" } else { options.prefix.as_str() };
    let secure = if over_https(options, request) { "; Secure" } else { "" };
    match id {
        Some(id) => format!(
            "{COOKIE}={id}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            options.session_ttl.as_secs()
        ),
        None => format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// Marks a request that came over HTTPS, for a face that knows (Python's ASGI scheme, Node's
/// TLS socket, a Rust host's TLS acceptor): put it in the request's extensions.
#[derive(Clone, Copy, Debug, Default)]
pub struct ViaHttps;

/// True when the browser used HTTPS: the request's URI or a face says so, or the header the
/// operator named for their proxy (`x-forwarded-proto`) does.
pub(crate) fn over_https(options: &WebOptions, request: &Request<Bytes>) -> bool {
    if request.uri().scheme_str() == Some("https") || request.extensions().get::<ViaHttps>().is_some() {
        return true;
    }
    let Some(name) = &options.forwarded_proto_header else { return false };
    // The first hop's word: the proxy nearest the browser writes the leftmost value.
    request
        .headers()
        .get(name.as_str())
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The host a request was sent to (`Host`, else the URI's authority), lower-case.
pub(crate) fn host(request: &Request<Bytes>) -> Option<String> {
    let named = request.headers().get(header::HOST).and_then(|v| v.to_str().ok());
    named.or_else(|| request.uri().authority().map(http::uri::Authority::as_str)).map(str::to_ascii_lowercase)
}

/// Whether the view answers a request sent to its `Host`. Where reads are open without a token,
/// or the operator listed allowed hosts, only this machine's names (`localhost`, `*.localhost`,
/// 127.0.0.0/8, `[::1]`, any port) and the listed hosts are answered: a page on another site
/// whose name an attacker rebinds to 127.0.0.1 sends its own name, and is refused.
pub(crate) fn host_allowed(options: &WebOptions, request: &Request<Bytes>) -> Result<(), Refusal> {
    if !options.open_reads && options.allowed_hosts.is_empty() {
        return Ok(());
    }
    let named = host(request).unwrap_or_default();
    if allowed(&options.allowed_hosts, &named) { Ok(()) } else { Err(Refusal::Host(named)) }
}

/// Splits `host[:port]` (`[v6]:port` too) into its name and port.
fn split_host(host: &str) -> (&str, Option<&str>) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':')),
            None => (host, None),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => (name, Some(port)),
        _ => (host, None),
    }
}

fn loopback(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// True when `host` is this machine's or one of `listed`: `name` (any port), `name:port`, or
/// `.example.com` (that domain and every name under it).
pub(crate) fn allowed(listed: &[String], host: &str) -> bool {
    let (name, port) = split_host(host);
    if name.is_empty() || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if loopback(name) {
        return true;
    }
    listed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        let (want, want_port) = split_host(&entry);
        let name_ok = match want.strip_prefix('.') {
            Some(domain) => name == domain || name.ends_with(&format!(".{domain}")),
            None => name == want,
        };
        name_ok && want_port.is_none_or(|p| Some(p) == port)
    })
}

/// True when a state-changing request comes from this site: `Sec-Fetch-Site` says so (a
/// browser's own word), else its `Origin` names the `Host` it was sent to; a script's request
/// with a bearer token and neither header passes (no browser sends a cross-site request
/// without `Origin`).
pub(crate) fn same_site(request: &Request<Bytes>, by_header: bool) -> bool {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) => {
            let host = host(request).unwrap_or_default();
            let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
            !host.is_empty() && origin_host.eq_ignore_ascii_case(&host)
        }
        None => by_header,
    }
}

/// Where a form may send the browser back to: this view's own pages only (`/`, `/?…`,
/// `/tasks/ID`); anything else is the list. A path is kept to the characters those pages'
/// links use, so no `//host`, `/\host` or scheme reaches a `Location`.
pub(crate) fn back(value: Option<&str>) -> String {
    let Some(value) = value else { return "/".to_owned() };
    let plain = |s: &str, extra: &[u8]| {
        s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b) || extra.contains(&b))
    };
    let ok = value == "/"
        || value.strip_prefix("/?").is_some_and(|query| plain(query, b"=&+,:;"))
        || value.strip_prefix("/tasks/").is_some_and(|id| !id.is_empty() && plain(id, b""));
    if ok { value.to_owned() } else { "/".to_owned() }
}

/// The same, from a form.
pub(crate) fn back_of(form: &params::Params) -> String {
    back(form.get("back"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_name_operators_limit_principals_and_refuse_weak_secrets() {
        let tokens = parse_tokens("# ops\nana:0123456789abcdef\n\nbob:fedcba9876543210:alice, carol\n").unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(tokens[0].matches("0123456789abcdef") && !tokens[0].matches("0123456789abcdeF"));
        assert_eq!(tokens[1].principals, Some(vec!["alice".to_owned(), "carol".to_owned()]));
        assert_eq!(parse_tokens("ana:short").unwrap_err().line, 1);
        assert!(parse_tokens("no-colon").is_err());
        assert!(!format!("{:?}", tokens[0]).contains("0123"), "Debug never shows the secret");
    }

    #[test]
    fn a_change_must_come_from_this_site() {
        let request = |headers: &[(&str, &str)]| {
            let mut builder = Request::post("/actions");
            for (k, v) in headers {
                builder = builder.header(*k, *v);
            }
            builder.body(Bytes::new()).unwrap()
        };
        assert!(same_site(&request(&[("sec-fetch-site", "same-origin")]), false));
        assert!(!same_site(&request(&[("sec-fetch-site", "cross-site"), ("origin", "http://h")]), false));
        assert!(same_site(&request(&[("origin", "http://127.0.0.1:8765"), ("host", "127.0.0.1:8765")]), false));
        assert!(!same_site(&request(&[("origin", "http://evil.example"), ("host", "127.0.0.1:8765")]), false));
        assert!(!same_site(&request(&[]), false), "a cookie's request without either header");
        assert!(same_site(&request(&[]), true), "a script with a bearer token");
    }

    #[test]
    fn only_this_machine_and_the_listed_hosts_are_answered() {
        for host in ["127.0.0.1:8765", "localhost", "LOCALHOST:80", "app.localhost:3000", "[::1]:8765", "127.1.2.3"] {
            assert!(allowed(&[], &host.to_ascii_lowercase()), "{host}");
        }
        for host in ["evil.example:8765", "evil.example", "127.0.0.1.evil.example", "localhost.evil", "", ":80"] {
            assert!(!allowed(&[], host), "{host}");
        }
        assert!(!allowed(&[], "localhost:80x"), "a port is digits");
        let listed = ["tasks.example.com".to_owned(), "ops.example.com:8443".to_owned(), ".corp.example".to_owned()];
        assert!(allowed(&listed, "tasks.example.com") && allowed(&listed, "tasks.example.com:443"));
        assert!(allowed(&listed, "ops.example.com:8443") && !allowed(&listed, "ops.example.com:8444"));
        assert!(allowed(&listed, "a.corp.example") && allowed(&listed, "corp.example"));
        assert!(!allowed(&listed, "evilcorp.example") && !allowed(&listed, "example.com"));
    }

    #[test]
    fn a_form_sends_the_browser_back_to_this_views_pages_only() {
        for ok in ["/", "/?status=working&tool=a+b", "/tasks/01JX-abc_9.z", "/?q=50%25"] {
            assert_eq!(back(Some(ok)), ok);
        }
        for bad in [
            "/\\evil.example",
            "//evil.example",
            "https://evil.example",
            "/tasks/../../x",
            "/tasks/a/b",
            "/tasks/",
            "/?a=<x>",
            "/login",
            "/?x=\\evil",
            "javascript:alert(1)",
            "/\tevil",
        ] {
            assert_eq!(back(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(back(None), "/");
    }
}
