//! Who is asking: tokens (from a file, a header or the login cookie), and whether a change came
//! from this site.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::{WebView, pages, params};

/// The login cookie's name.
const COOKIE: &str = "mcp_tasks_web";

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
        Self { name: name.into(), digest: digest(secret), principals }
    }

    fn matches(&self, secret: &str) -> bool {
        // Equal digests in constant time: how long the comparison takes says nothing of the secret.
        let theirs = digest(secret);
        self.digest.iter().zip(theirs).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
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
    /// True when the token came in an `Authorization` header (a script), not a cookie.
    pub(crate) by_header: bool,
}

impl Viewer {
    pub(crate) fn anonymous() -> Self {
        Self { name: None, principals: None, by_header: false }
    }
}

/// The token holder a request comes from, by its `Authorization: Bearer` header or its cookie.
pub(crate) fn viewer(view: &WebView, request: &Request<Bytes>) -> Option<Viewer> {
    let tokens = &view.inner.options.tokens;
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let (secret, by_header) = match bearer {
        Some(secret) => (secret.to_owned(), true),
        None => (cookie(request)?, false),
    };
    let token = tokens.iter().find(|t| t.matches(&secret))?;
    Some(Viewer { name: Some(token.name.clone()), principals: token.principals.clone(), by_header })
}

fn cookie(request: &Request<Bytes>) -> Option<String> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| params::decode(value))
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
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
            !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
        }
        None => by_header,
    }
}

/// `POST /login`: a form with the token; sets the cookie and goes to the list.
pub(crate) fn login(view: &WebView, request: &Request<Bytes>) -> Response<Bytes> {
    if !same_site(request, false) {
        return pages::error(view, StatusCode::FORBIDDEN, "Refused: the request came from another site.");
    }
    let form = params::Params::parse(request.body());
    let secret = form.get("token").unwrap_or_default();
    if !view.inner.options.tokens.iter().any(|t| t.matches(secret)) {
        let mut page = pages::login(view, request, Some("That token is not one this view accepts."));
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        return page;
    }
    let path = if view.inner.options.prefix.is_empty() { "/" } else { view.inner.options.prefix.as_str() };
    let cookie = format!("{COOKIE}={}; Path={path}; HttpOnly; SameSite=Strict", params::encode(secret));
    redirect(view, "/", Some(cookie))
}

/// `POST /logout`: clears the cookie.
pub(crate) fn logout(view: &WebView, request: &Request<Bytes>) -> Response<Bytes> {
    if !same_site(request, false) {
        return pages::error(view, StatusCode::FORBIDDEN, "Refused: the request came from another site.");
    }
    let path = if view.inner.options.prefix.is_empty() { "/" } else { view.inner.options.prefix.as_str() };
    redirect(view, "/login", Some(format!("{COOKIE}=; Path={path}; HttpOnly; SameSite=Strict; Max-Age=0")))
}

/// A 303 to `path` (under the prefix), optionally setting a cookie.
pub(crate) fn redirect(view: &WebView, path: &str, cookie: Option<String>) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(&view.href(path)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
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
}
