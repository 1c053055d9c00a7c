//! The web view for Python: `mcp_tasks.web.WebApp` (an ASGI app) hands each request to core's
//! `WebView::handle` and sends back what it answers, so the page bytes are core's.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::awaitable;
use crate::error::store_error;

/// The operator's web view over one store (core's `mcp_tasks_web::WebView`).
#[pyclass(module = "mcp_tasks._native", name = "WebView", frozen)]
pub(crate) struct PyWebView {
    view: mcp_tasks_web::WebView,
}

/// One answer: status, headers (bytes pairs), body.
type Answer = (u16, Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>);

#[pymethods]
impl PyWebView {
    /// Opens the store at `url` (as `mcp-tasks` does) and makes a view over it; `tokens` is the
    /// text of a token file (`NAME:SECRET[:PRINCIPALS]` a line). Defaults are core's
    /// (`WebOptions::default()`): reads closed unless `open_reads`.
    #[staticmethod]
    #[pyo3(signature = (
        url, *, prefix = None, tokens = None, read_only = false, open_reads = None, show_payloads = false,
        allowed_hosts = None, forwarded_proto_header = None, session_ttl_s = None, trace_url = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        url: String,
        prefix: Option<String>,
        tokens: Option<String>,
        read_only: bool,
        open_reads: Option<bool>,
        show_payloads: bool,
        allowed_hosts: Option<Vec<String>>,
        forwarded_proto_header: Option<String>,
        session_ttl_s: Option<f64>,
        trace_url: Option<String>,
    ) -> PyResult<Bound<'_, PyAny>> {
        let trace_url =
            trace_url.map(|url| mcp_tasks_web::check_trace_url(&url).map_err(PyValueError::new_err)).transpose()?;
        let tokens = match tokens {
            Some(text) => mcp_tasks_web::parse_tokens(&text).map_err(|e| PyValueError::new_err(e.to_string()))?,
            None => Vec::new(),
        };
        let defaults = mcp_tasks_web::WebOptions::default();
        let session_ttl = match session_ttl_s {
            None => defaults.session_ttl,
            Some(s) => std::time::Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| PyValueError::new_err(format!("session_ttl {s}: a positive number of seconds")))?,
        };
        let options = mcp_tasks_web::WebOptions {
            prefix: prefix.unwrap_or_default(),
            read_only,
            tokens,
            open_reads: open_reads.unwrap_or(defaults.open_reads),
            allowed_hosts: allowed_hosts.unwrap_or_default(),
            forwarded_proto_header,
            session_ttl,
            show_payloads,
            trace_url,
            ..defaults
        };
        awaitable(py, async move {
            let view = mcp_tasks_web::WebView::open(&url, options).await.map_err(|e| match e {
                mcp_tasks::admin::AdminError::Store(e) => store_error(e),
                other => PyValueError::new_err(other.to_string()),
            })?;
            Ok(Self { view })
        })
    }

    /// Answers one request: `target` is its path and query, `https` whether it came over TLS
    /// (ASGI's scheme); returns `(status, headers, body)`.
    #[pyo3(signature = (method, target, headers, body, https = false))]
    fn handle<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        target: &str,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
        body: Vec<u8>,
        https: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut request = http::Request::builder().method(method).uri(target);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if https {
            request = request.extension(mcp_tasks_web::ViaHttps);
        }
        let request =
            request.body(bytes::Bytes::from(body)).map_err(|e| PyValueError::new_err(format!("a bad request: {e}")))?;
        let view = self.view.clone();
        awaitable(py, async move {
            let response = view.handle(request).await;
            let headers = response
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec()))
                .collect();
            let answer: Answer = (response.status().as_u16(), headers, response.body().to_vec());
            Ok(answer)
        })
    }
}
