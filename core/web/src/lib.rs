//! The operator's web view of an mcp-tasks store: every task at a glance (counts, filters
//! evaluated in the store, keyset pages), a task's detail and history, cancel and purge.
//!
//! One request → response function, [`WebView::handle`], renders every page: the `mcp-tasks web`
//! command and a Rust host (feature `axum`: [`router`]) call it, and so do the Python and
//! TypeScript servers through their bindings, so every face serves the same bytes. Pages are
//! server-rendered HTML (askama templates, checked at compile time and escaped by default), with
//! one stylesheet and one small script embedded in the binary; every page works with scripts
//! off.
//!
//! Reads and writes go through [`mcp_tasks::admin::Admin`], the code the `mcp-tasks` CLI runs:
//! a cancel is the transition function's with a compare-and-set (queued for the live host that
//! owns a SQLite file), a purge deletes terminal tasks only, and both name the operator in the
//! task's history.
//!
//! Closed by default: reading needs a token unless the application opens reads
//! ([`WebOptions::open_reads`]; `mcp-tasks web` does on a loopback address only), and where reads
//! are open, only a `Host` of this machine (or one the operator allowed) is answered, so a page
//! elsewhere cannot read the view through DNS rebinding. Every change needs a token
//! ([`WebOptions::tokens`]): the sign-in form starts a session kept in the store (the cookie
//! holds a random id, `HttpOnly`, `SameSite=Strict`, scoped to the prefix, `Secure` over HTTPS;
//! sign-out ends it on every worker) and scripts send `Authorization: Bearer`. A state-changing
//! request from another site is refused (`Sec-Fetch-Site`, else `Origin` against `Host`), a form
//! sends the browser back only to this view's own pages, every page carries a
//! Content-Security-Policy without inline script and `frame-ancestors 'none'`, a token may be
//! limited to principals (every query, and what `/changes` tells, filters on them), and
//! [`WebOptions::read_only`] hides and refuses every action.

#![warn(missing_docs)]

mod actions;
mod auth;
mod chart;
mod live;
mod pages;
mod params;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use mcp_tasks::admin::Admin;

pub use auth::{Token, TokenError, ViaHttps, parse_tokens};

/// A hook that turns a payload into what may be shown.
pub type Redact = Arc<dyn Fn(&serde_json::Value) -> serde_json::Value + Send + Sync>;

/// How a [`WebView`] behaves.
#[derive(Clone)]
pub struct WebOptions {
    /// The path the view is mounted under (`/tasks`; empty for the root). No trailing slash.
    pub prefix: String,
    /// Hide and refuse every action.
    pub read_only: bool,
    /// The tokens that may read and act. None: nobody may change anything (nor read, unless
    /// [`WebOptions::open_reads`]).
    pub tokens: Vec<Token>,
    /// Reading needs no token. Off by default: turn it on only where just this machine's users
    /// reach the view (`mcp-tasks web` does on a loopback address); requests are then answered
    /// only when their `Host` is this machine's or one of [`WebOptions::allowed_hosts`].
    pub open_reads: bool,
    /// The host names (`tasks.example.com`, `name:port`, or `.example.com` for a domain and its
    /// names) this view answers besides this machine's own, for a view with open reads behind
    /// a proxy. When set, every request is checked, whether reads are open or not.
    pub allowed_hosts: Vec<String>,
    /// The header a trusted proxy in front of the view sets to the scheme the browser used
    /// (`x-forwarded-proto`): the session cookie is then `Secure` when it says `https`. Name it
    /// only when such a proxy strips the header from what browsers send.
    pub forwarded_proto_header: Option<String>,
    /// How long a sign-in lasts.
    pub session_ttl: std::time::Duration,
    /// The most `/changes` requests this process holds at once; beyond it (or beyond a few for
    /// one operator, a browser's connections being few) one is answered at once, and its page
    /// asks again a few seconds later.
    pub max_held: usize,
    /// Show results and error data in a task's detail (off by default: payloads may hold what
    /// an operator should not see; [`WebOptions::redact`] can also trim them).
    pub show_payloads: bool,
    /// Called on a result or error payload before it is shown (when shown at all): return what
    /// may be displayed.
    pub redact: Option<Redact>,
    /// The most bytes of a payload a detail page shows.
    pub payload_limit: usize,
    /// The most tasks an action on "everything matching" may change.
    pub bulk_limit: usize,
    /// A task page links its trace id here, `{trace_id}` replaced by it (Jaeger:
    /// `http://jaeger:16686/trace/{trace_id}`; Tempo, Honeycomb... alike). Only an `http` or
    /// `https` URL is accepted ([`WebOptions::with_trace_url`]; [`WebView::new`] drops any other,
    /// with a warning).
    pub trace_url: Option<String>,
}

impl WebOptions {
    /// Sets [`WebOptions::trace_url`]: an `http://` or `https://` URL holding `{trace_id}`;
    /// anything else (a `javascript:` URL, no placeholder) is refused with why.
    pub fn with_trace_url(mut self, template: &str) -> Result<Self, String> {
        self.trace_url = Some(check_trace_url(template)?);
        Ok(self)
    }
}

/// A trace URL template as [`WebOptions::with_trace_url`] accepts it.
pub fn check_trace_url(template: &str) -> Result<String, String> {
    let lower = template.trim().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!("trace URL {template:?}: only http:// and https:// URLs are linked"));
    }
    if !template.contains("{trace_id}") {
        return Err(format!("trace URL {template:?} has no {{trace_id}} to replace"));
    }
    Ok(template.trim().to_owned())
}

impl Default for WebOptions {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            read_only: false,
            tokens: Vec::new(),
            open_reads: false,
            allowed_hosts: Vec::new(),
            forwarded_proto_header: None,
            session_ttl: std::time::Duration::from_secs(8 * 3600),
            max_held: 256,
            show_payloads: false,
            redact: None,
            payload_limit: 64 * 1024,
            bulk_limit: 1_000,
            trace_url: None,
        }
    }
}

impl std::fmt::Debug for WebOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens' secrets.
        f.debug_struct("WebOptions")
            .field("prefix", &self.prefix)
            .field("read_only", &self.read_only)
            .field("tokens", &self.tokens.len())
            .field("open_reads", &self.open_reads)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("forwarded_proto_header", &self.forwarded_proto_header)
            .field("session_ttl", &self.session_ttl)
            .field("max_held", &self.max_held)
            .field("show_payloads", &self.show_payloads)
            .field("redact", &self.redact.is_some())
            .field("trace_url", &self.trace_url)
            .finish_non_exhaustive()
    }
}

/// The web view over one store.
#[derive(Clone)]
pub struct WebView {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    admin: Admin,
    options: WebOptions,
    live: live::Live,
    /// The list's counts per principal scope, served up to a second old (see [`WebView::overview`]).
    counts: std::sync::Mutex<std::collections::HashMap<Option<Vec<String>>, Counted>>,
    /// The chart's minutes per principal scope, served up to `ACTIVITY_FRESH` old.
    activity: std::sync::Mutex<std::collections::HashMap<Option<Vec<String>>, Charted>>,
}

/// The chart's minutes as last read, and when.
type Charted = (mcp_tasks::admin::query::Activity, std::time::Instant);

/// Counts as last read, and whether a refresh is under way.
struct Counted {
    overview: mcp_tasks::admin::query::Overview,
    at: std::time::Instant,
    refreshing: bool,
}

/// How old the list's counts may be before a page asks for fresh ones (which the page after it
/// shows: counting a million rows takes longer than a page should).
const COUNTS_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How old the chart's minutes may be: it reads every task changed in the last hour, so a busy
/// store is not asked for it on every page read (a live page reads itself up to twice a second).
const ACTIVITY_FRESH: std::time::Duration = std::time::Duration::from_secs(5);

impl std::fmt::Debug for WebView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebView").field("prefix", &self.inner.options.prefix).finish_non_exhaustive()
    }
}

/// The Content-Security-Policy of every answer: this origin's stylesheet and script only, no
/// inline script, no framing, forms posting back here only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

impl WebView {
    /// A view over the store `admin` operates.
    pub fn new(admin: Admin, mut options: WebOptions) -> Self {
        options.prefix = options.prefix.trim_end_matches('/').to_owned();
        // The field is public: a template set without `with_trace_url` is checked here, so no
        // page links anything but an http(s) URL.
        options.trace_url = options.trace_url.and_then(|template| {
            check_trace_url(&template).inspect_err(|e| tracing::warn!("{e}: task pages link no trace")).ok()
        });
        let inner =
            Inner { admin, options, live: live::Live::new(), counts: Default::default(), activity: Default::default() };
        Self { inner: Arc::new(inner) }
    }

    /// Opens the store at `url` (as `mcp-tasks` does) and makes a view over it.
    pub async fn open(url: &str, options: WebOptions) -> Result<Self, mcp_tasks::admin::AdminError> {
        Ok(Self::new(Admin::open(url).await?, options))
    }

    /// The options it runs with.
    pub fn options(&self) -> &WebOptions {
        &self.inner.options
    }

    /// Answers one request (its path includes the prefix). Never fails: a refusal or a store
    /// error is a page saying so, with its status.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Bytes> {
        let mut response = self.route(request).await;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
        headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
        response
    }

    async fn route(&self, request: Request<Bytes>) -> Response<Bytes> {
        let options = &self.inner.options;
        let path = request.uri().path();
        let Some(rest) = path.strip_prefix(options.prefix.as_str()) else {
            return pages::error(self, StatusCode::NOT_FOUND, "No such page.");
        };
        let rest = if rest.is_empty() { "/" } else { rest };
        if !rest.starts_with('/') {
            return pages::error(self, StatusCode::NOT_FOUND, "No such page.");
        }
        // Before anything else, the sign-in form included: a rebound name reads nothing.
        if let Err(refused) = auth::host_allowed(options, &request) {
            tracing::warn!(target: "mcp_tasks_web::audit", refused = ?refused, "request to a host this view does not answer");
            return pages::refusal(self, refused);
        }
        let rest = rest.to_owned();
        let method = request.method().clone();
        match (method, rest.as_str()) {
            (Method::GET, "/assets/app.css") => pages::asset("text/css; charset=utf-8", pages::APP_CSS),
            (Method::GET, "/assets/favicon.svg") => pages::asset("image/svg+xml", pages::FAVICON),
            (Method::GET, "/assets/app.js") => pages::asset("text/javascript; charset=utf-8", pages::APP_JS),
            (Method::GET, "/login") => pages::login(self, None),
            (Method::POST, "/login") => self.sign_in(&request).await,
            (Method::POST, "/logout") => self.sign_out(&request).await,
            (Method::GET | Method::HEAD, "/") => match self.reader(&request).await {
                Ok(viewer) => pages::list(self, &request, &viewer).await,
                Err(refused) => pages::refusal(self, refused),
            },
            (Method::GET, "/changes") => match self.reader(&request).await {
                Ok(viewer) => live::changes(&self.inner, &request, &viewer).await,
                Err(refused) => pages::refusal(self, refused),
            },
            (Method::GET | Method::HEAD, rest) if rest.starts_with("/tasks/") && !rest[7..].contains('/') => {
                match self.reader(&request).await {
                    Ok(viewer) => pages::detail(self, &viewer, &rest[7..]).await,
                    Err(refused) => pages::refusal(self, refused),
                }
            }
            (Method::POST, "/actions") => match self.actor(&request).await {
                Ok(viewer) => {
                    let form = params::Params::parse(request.body());
                    let outcome = actions::act(self.admin(), &form, &viewer, options.bulk_limit).await;
                    actions::audit(&viewer, &outcome);
                    pages::outcome(self, &viewer, outcome)
                }
                Err(refused) => pages::refusal(self, refused),
            },
            (_, "/" | "/actions" | "/login" | "/logout") => {
                pages::error(self, StatusCode::METHOD_NOT_ALLOWED, "That method is not allowed here.")
            }
            _ => pages::error(self, StatusCode::NOT_FOUND, "No such page."),
        }
    }

    /// Who reads: a token's holder, or anyone when reads are open.
    async fn reader(&self, request: &Request<Bytes>) -> Result<auth::Viewer, auth::Refusal> {
        match auth::viewer(&self.inner.options, self.admin(), request).await {
            Ok(Some(viewer)) => Ok(viewer),
            Ok(None) if self.inner.options.open_reads => Ok(auth::Viewer::anonymous()),
            Ok(None) => Err(auth::Refusal::SignIn),
            Err(e) => Err(auth::Refusal::Store(e)),
        }
    }

    /// Who changes something: a token's holder, from this site, when actions are on.
    async fn actor(&self, request: &Request<Bytes>) -> Result<auth::Viewer, auth::Refusal> {
        if self.inner.options.read_only {
            return Err(auth::Refusal::ReadOnly);
        }
        let viewer = match auth::viewer(&self.inner.options, self.admin(), request).await {
            Ok(Some(viewer)) => viewer,
            Ok(None) => return Err(auth::Refusal::NoToken),
            Err(e) => return Err(auth::Refusal::Store(e)),
        };
        if !auth::same_site(request, viewer.by_header) {
            return Err(auth::Refusal::CrossSite);
        }
        Ok(viewer)
    }

    /// `POST /login`: a form with the token; starts a session and goes to the list.
    async fn sign_in(&self, request: &Request<Bytes>) -> Response<Bytes> {
        if !auth::same_site(request, false) {
            return pages::refusal(self, auth::Refusal::CrossSite);
        }
        let form = params::Params::parse(request.body());
        let secret = form.get("token").unwrap_or_default();
        match auth::sign_in(&self.inner.options, self.admin(), secret).await {
            Ok(Some((id, operator))) => {
                tracing::info!(target: "mcp_tasks_web::audit", %operator, "operator signed in");
                pages::redirect(self, "/", Some(auth::cookie(&self.inner.options, request, Some(&id))))
            }
            Ok(None) => {
                tracing::warn!(target: "mcp_tasks_web::audit", host = ?auth::host(request), "sign-in refused: not a token of this view");
                pages::login(self, Some("That token is not one this view accepts."))
            }
            Err(e) => pages::refusal(self, auth::Refusal::Store(e)),
        }
    }

    /// `POST /logout`: ends the session in the store (on every worker) and clears the cookie.
    async fn sign_out(&self, request: &Request<Bytes>) -> Response<Bytes> {
        if !auth::same_site(request, false) {
            return pages::refusal(self, auth::Refusal::CrossSite);
        }
        match auth::sign_out(self.admin(), request).await {
            Ok(Some(operator)) => tracing::info!(target: "mcp_tasks_web::audit", %operator, "operator signed out"),
            Ok(None) => {}
            Err(e) => return pages::refusal(self, auth::Refusal::Store(e)),
        }
        pages::redirect(self, "/login", Some(auth::cookie(&self.inner.options, request, None)))
    }

    /// The id of what `viewer` may see of the store now, for a page to follow (see `live`).
    async fn live_id(&self, viewer: &auth::Viewer) -> Option<String> {
        live::current(&self.inner, viewer.principals.as_deref()).await
    }

    /// The counts a list page shows for `query`'s principal scope. Counting reads every row of
    /// a status (150–350 ms over a million tasks), so a page shows counts read up to
    /// `COUNTS_FRESH` ago; older ones are shown once more while a refresh runs in the background.
    /// Only a scope's first page waits for its count.
    async fn overview(
        &self,
        query: &mcp_tasks::admin::query::TaskQuery,
    ) -> Result<mcp_tasks::admin::query::Overview, mcp_tasks::admin::AdminError> {
        let key = query.principals.clone();
        let scope = mcp_tasks::admin::query::TaskQuery { principals: key.clone(), ..Default::default() };
        let stale = {
            let mut counts = self.inner.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match counts.get_mut(&key) {
                Some(counted) if counted.at.elapsed() < COUNTS_FRESH || counted.refreshing => {
                    return Ok(counted.overview.clone());
                }
                Some(counted) => {
                    counted.refreshing = true;
                    Some(counted.overview.clone())
                }
                None => None,
            }
        };
        let Some(stale) = stale else {
            let overview = self.inner.admin.overview(&scope).await?;
            let counted = Counted { overview: overview.clone(), at: std::time::Instant::now(), refreshing: false };
            self.inner.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, counted);
            return Ok(overview);
        };
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            let fresh = inner.admin.overview(&scope).await;
            let mut counts = inner.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match (fresh, counts.get_mut(&key)) {
                (Ok(overview), Some(counted)) => {
                    *counted = Counted { overview, at: std::time::Instant::now(), refreshing: false };
                }
                // A store that failed: the next page tries again.
                (_, Some(counted)) => counted.refreshing = false,
                (_, None) => {}
            }
        });
        Ok(stale)
    }

    /// The chart's minutes for `principals`' scope, read at most every `ACTIVITY_FRESH`.
    async fn activity(
        &self,
        principals: Option<&[String]>,
        now_ms: u64,
    ) -> Result<mcp_tasks::admin::query::Activity, mcp_tasks::admin::AdminError> {
        let key = principals.map(<[String]>::to_vec);
        {
            let cached = self.inner.activity.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((activity, at)) = cached.get(&key)
                && at.elapsed() < ACTIVITY_FRESH
            {
                return Ok(activity.clone());
            }
        }
        let activity = self.inner.admin.activity(principals, now_ms).await?;
        let mut cached = self.inner.activity.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cached.insert(key, (activity.clone(), std::time::Instant::now()));
        Ok(activity)
    }

    fn admin(&self) -> &Admin {
        &self.inner.admin
    }

    fn href(&self, path: &str) -> String {
        format!("{}{path}", self.inner.options.prefix)
    }
}

/// The view as an axum router (feature `axum`), its routes under the view's prefix: merge it into
/// a host's router (`host.router("/mcp").merge(mcp_tasks_web::router(view))`).
#[cfg(feature = "axum")]
pub fn router(view: WebView) -> axum::Router {
    use axum::body::Body;
    use axum::response::IntoResponse;

    async fn serve(
        axum::extract::State(view): axum::extract::State<WebView>,
        request: Request<Body>,
    ) -> axum::response::Response {
        let (parts, body) = request.into_parts();
        // Forms and logins are small; a larger body is refused before it is read whole.
        let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
            return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
        };
        let response = view.handle(Request::from_parts(parts, bytes)).await;
        response.map(Body::from).into_response()
    }

    let prefix = view.inner.options.prefix.clone();
    let mut router = axum::Router::new()
        .route(&format!("{prefix}/"), axum::routing::any(serve))
        .route(&format!("{prefix}/{{*rest}}"), axum::routing::any(serve));
    if !prefix.is_empty() {
        router = router.route(&prefix, axum::routing::any(serve));
    }
    router.with_state(view)
}
