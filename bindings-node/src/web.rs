//! The web view for Node: `webHandler` of `mcp-tasks/server` hands each `node:http` request to
//! core's `WebView::handle` and writes back what it answers, so the page bytes are core's.

use std::collections::HashMap;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

/// How a web view behaves (core's `WebOptions`; absent fields take its defaults).
#[napi(object)]
pub struct WebViewOptions {
    /// The path it is mounted under (`/tasks`), without a trailing slash.
    pub prefix: Option<String>,
    /// A token file's text: `NAME:SECRET` or `NAME:SECRET:PRINCIPAL,...` a line.
    pub tokens: Option<String>,
    /// Hide and refuse every action.
    pub read_only: Option<bool>,
    /// Reading needs no token (default false; then only this machine's host names and
    /// `allowed_hosts` are answered).
    pub open_reads: Option<bool>,
    /// Show results and error data on a task's page.
    pub show_payloads: Option<bool>,
    /// Host names answered besides this machine's (`tasks.example.com`, `name:port`,
    /// `.example.com`), for a view behind a proxy.
    pub allowed_hosts: Option<Vec<String>>,
    /// The header a trusted proxy sets to the browser's scheme (`x-forwarded-proto`).
    pub forwarded_proto_header: Option<String>,
    /// How long a sign-in lasts, in seconds (default 8 hours).
    pub session_ttl_seconds: Option<f64>,
    /// A task page links its trace id here: an http(s) URL with `{trace_id}`.
    pub trace_url: Option<String>,
}

/// One answer of the view.
#[napi(object)]
pub struct WebAnswer {
    /// The HTTP status.
    pub status: u32,
    /// The response headers (lower-case names).
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: Buffer,
}

/// The operator's web view over one store.
#[napi]
pub struct NativeWebView {
    view: mcp_tasks_web::WebView,
}

#[napi]
impl NativeWebView {
    /// Opens the store at `url` (as `mcp-tasks` does) and makes a view over it.
    #[napi]
    pub async fn open(url: String, options: Option<WebViewOptions>) -> napi::Result<Self> {
        let options = options.unwrap_or(WebViewOptions {
            prefix: None,
            tokens: None,
            read_only: None,
            open_reads: None,
            show_payloads: None,
            allowed_hosts: None,
            forwarded_proto_header: None,
            session_ttl_seconds: None,
            trace_url: None,
        });
        let tokens = match &options.tokens {
            Some(text) => mcp_tasks_web::parse_tokens(text).map_err(|e| invalid(e.to_string()))?,
            None => Vec::new(),
        };
        let trace_url =
            options.trace_url.map(|url| mcp_tasks_web::check_trace_url(&url).map_err(invalid)).transpose()?;
        let defaults = mcp_tasks_web::WebOptions::default();
        let session_ttl = match options.session_ttl_seconds {
            None => defaults.session_ttl,
            Some(s) => std::time::Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| invalid(format!("sessionTtlSeconds {s}: a positive number of seconds")))?,
        };
        let options = mcp_tasks_web::WebOptions {
            prefix: options.prefix.unwrap_or_default(),
            tokens,
            read_only: options.read_only.unwrap_or(defaults.read_only),
            open_reads: options.open_reads.unwrap_or(defaults.open_reads),
            show_payloads: options.show_payloads.unwrap_or(defaults.show_payloads),
            allowed_hosts: options.allowed_hosts.unwrap_or_default(),
            forwarded_proto_header: options.forwarded_proto_header,
            session_ttl,
            trace_url,
            ..defaults
        };
        let view = mcp_tasks_web::WebView::open(&url, options).await.map_err(|e| invalid(e.to_string()))?;
        Ok(Self { view })
    }

    /// Answers one request: `target` is its path and query, `headers` its name-value pairs,
    /// `https` whether it came over TLS.
    #[napi]
    pub async fn handle(
        &self,
        method: String,
        target: String,
        headers: Vec<Vec<String>>,
        body: Buffer,
        https: Option<bool>,
    ) -> napi::Result<WebAnswer> {
        let mut request = http::Request::builder().method(method.as_str()).uri(target.as_str());
        for pair in &headers {
            if let [name, value] = pair.as_slice() {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        if https == Some(true) {
            request = request.extension(mcp_tasks_web::ViaHttps);
        }
        let request =
            request.body(bytes::Bytes::copy_from_slice(&body)).map_err(|e| invalid(format!("a bad request: {e}")))?;
        let response = self.view.handle(request).await;
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        Ok(WebAnswer { status: u32::from(response.status().as_u16()), headers, body: response.body().to_vec().into() })
    }
}

fn invalid(message: String) -> napi::Error {
    napi::Error::new(napi::Status::InvalidArg, message)
}
