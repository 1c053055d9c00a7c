//! Per-request negotiation: the `_meta` envelope, the extension declaration, the per-tool task
//! mode and the advertisement
//! (<https://modelcontextprotocol.io/specification/2026-07-28/basic/versioning>,
//! <https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html>).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::error::ProtocolError;
use super::types::{
    EXTENSION_ID, InputRequests, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, PROTOCOL_VERSION,
};

/// The protocol versions this crate serves.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

/// The revisions before 2026-07-28 that an SDK's legacy path serves (the TypeScript SDK 2.4.0's
/// `SUPPORTED_PROTOCOL_VERSIONS`): a request naming another one in its `MCP-Protocol-Version`
/// header is no 2025-era traffic an SDK would take, and core answers it, the same on every server.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];

/// The per-request `_meta` envelope of MCP 2026-07-28. Serializable so a resumable task's call
/// can be stored with it and run again as the client sent it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientCapabilities` for this request only.
    pub client_capabilities: Map<String, Value>,
    /// `io.modelcontextprotocol/clientInfo`, self-reported.
    pub client_info: Option<Value>,
}

impl Envelope {
    /// The envelope as the request's `_meta` carries it.
    pub fn to_meta(&self) -> Map<String, Value> {
        let mut meta = Map::new();
        meta.insert(META_PROTOCOL_VERSION.into(), Value::String(self.protocol_version.clone()));
        meta.insert(META_CLIENT_CAPABILITIES.into(), Value::Object(self.client_capabilities.clone()));
        if let Some(info) = &self.client_info {
            meta.insert(META_CLIENT_INFO.into(), info.clone());
        }
        meta
    }

    /// True when this very request declares the tasks extension.
    pub fn declares_tasks(&self) -> bool {
        declares_tasks(&self.client_capabilities)
    }

    /// True when this request declares the named top-level client capability
    /// (`elicitation`, `sampling`, `roots`).
    pub fn declares(&self, capability: &str) -> bool {
        self.client_capabilities.get(capability).is_some_and(Value::is_object)
    }

    /// Refuses with -32021 unless this request declares the tasks extension.
    pub fn require_tasks(&self, what: &str) -> Result<(), ProtocolError> {
        require_tasks(&self.client_capabilities, what)
    }

    /// Refuses with -32021 input requests this request's client did not declare it can answer
    /// (see [`check_input_requests`]).
    pub fn check_input_requests(&self, requests: &InputRequests) -> Result<(), ProtocolError> {
        check_input_requests(&self.client_capabilities, requests)
    }
}

/// The `_meta` envelope as the request carries it, borrowed from its params: what the dispatcher
/// checks on every request. Only a call that keeps it copies it ([`EnvelopeRef::to_envelope`]):
/// a copy of the capabilities per `tasks/get` showed in profiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvelopeRef<'a> {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: &'a str,
    /// `io.modelcontextprotocol/clientCapabilities` for this request only.
    pub client_capabilities: &'a Map<String, Value>,
    /// `io.modelcontextprotocol/clientInfo`, self-reported.
    pub client_info: Option<&'a Value>,
}

impl EnvelopeRef<'_> {
    /// The envelope, copied out of the request.
    pub fn to_envelope(&self) -> Envelope {
        Envelope {
            protocol_version: self.protocol_version.to_owned(),
            client_capabilities: self.client_capabilities.clone(),
            client_info: self.client_info.cloned(),
        }
    }

    /// True when this very request declares the tasks extension.
    pub fn declares_tasks(&self) -> bool {
        declares_tasks(self.client_capabilities)
    }

    /// Refuses with -32021 unless this request declares the tasks extension.
    pub fn require_tasks(&self, what: &str) -> Result<(), ProtocolError> {
        require_tasks(self.client_capabilities, what)
    }
}

fn declares_tasks(client_capabilities: &Map<String, Value>) -> bool {
    client_capabilities
        .get("extensions")
        .and_then(Value::as_object)
        .is_some_and(|exts| exts.get(EXTENSION_ID).is_some_and(Value::is_object))
}

fn require_tasks(client_capabilities: &Map<String, Value>, what: &str) -> Result<(), ProtocolError> {
    if declares_tasks(client_capabilities) { Ok(()) } else { Err(missing_tasks_capability(what)) }
}

/// The -32021 error naming the tasks extension in `data.requiredCapabilities`.
pub fn missing_tasks_capability(what: &str) -> ProtocolError {
    ProtocolError::MissingCapability {
        message: format!("{what} requires the {EXTENSION_ID} extension in this request's clientCapabilities"),
        required: json!({ "extensions": { EXTENSION_ID: {} } }),
    }
}

/// Refuses with -32021 when one of `requests` is of a type the client did not declare in
/// `client_capabilities`: the MRTR rule ("servers MUST NOT send input requests for capabilities
/// the client has not declared",
/// <https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr>), which this
/// crate applies to a task's `inputRequests` too, against the request that created the task.
///
/// The rule is the TypeScript SDK 2.4.0's (`requiredClientCapabilitiesForInputRequest`,
/// `missingClientCapabilities`), so its own answers for a synchronous tool and ours agree byte
/// for byte: `elicitation/create` needs `elicitation.form` (a bare `elicitation: {}`, declaring
/// no mode, counts as form, its pre-mode meaning) or, with `mode: "url"`, `elicitation.url`;
/// `sampling/createMessage` needs `sampling`, and `sampling.tools` when it offers `tools` or a
/// `toolChoice`; `roots/list` needs `roots`. The first request in order that needs what is not
/// declared is refused, `data.requiredCapabilities` naming exactly what it misses. An entry that
/// is none of the three (no `method`, or another one) is a server bug: -32603.
pub fn check_input_requests(
    client_capabilities: &Map<String, Value>,
    requests: &InputRequests,
) -> Result<(), ProtocolError> {
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str);
        let param = |name: &str| request.get("params").and_then(Value::as_object).and_then(|p| p.get(name));
        let (capability, member) = match method {
            Some("elicitation/create") if param("mode").and_then(Value::as_str) == Some("url") => {
                ("elicitation", Some("url"))
            }
            Some("elicitation/create") => ("elicitation", Some("form")),
            Some("sampling/createMessage") if param("tools").is_some() || param("toolChoice").is_some() => {
                ("sampling", Some("tools"))
            }
            Some("sampling/createMessage") => ("sampling", None),
            Some("roots/list") => ("roots", None),
            Some(other) => {
                return Err(ProtocolError::Internal(format!(
                    "input request '{key}' is of kind '{other}', which is not an embedded request the \
                     2026-07-28 revision defines (elicitation/create, sampling/createMessage, roots/list)"
                )));
            }
            None => {
                return Err(ProtocolError::Internal(format!(
                    "input request '{key}' must be an embedded elicitation/create, sampling/createMessage or \
                     roots/list request"
                )));
            }
        };
        let missing = match (client_capabilities.get(capability), member) {
            (None, member) => Some(member),
            (Some(_), None) => None,
            (Some(Value::Object(declared)), Some(member)) => {
                // A bare `elicitation` declaring no mode declares form.
                let implied = member == "form" && !declared.contains_key("form") && !declared.contains_key("url");
                (!declared.contains_key(member) && !implied).then_some(Some(member))
            }
            // Declared, but not as an object: the SDK names no member missing there.
            (Some(_), Some(_)) => None,
        };
        if let Some(member) = missing {
            let mut required = Map::new();
            if let Some(member) = member {
                required.insert(member.to_owned(), Value::Object(Map::new()));
            }
            return Err(ProtocolError::MissingCapability {
                message: format!(
                    "Cannot request input '{key}' ({}): the request's client capabilities do not declare the \
                     required capability",
                    method.unwrap_or_default()
                ),
                required: json!({ capability: required }),
            });
        }
    }
    Ok(())
}

/// Reads the `_meta` envelope from `params`. Missing or non-object `params`, `_meta`, a
/// missing or non-string protocol version, or non-object capabilities are -32602; an
/// unsupported version is -32022.
pub fn parse_envelope(params: Option<&Value>) -> Result<Envelope, ProtocolError> {
    let envelope = parse_envelope_shape(params)?;
    check_version(envelope.protocol_version)?;
    Ok(envelope.to_envelope())
}

/// [`parse_envelope`] without the version check (for callers that check headers in between),
/// and without copying the envelope out of `params`.
pub fn parse_envelope_shape(params: Option<&Value>) -> Result<EnvelopeRef<'_>, ProtocolError> {
    let meta = match params.and_then(|p| p.get("_meta")) {
        Some(Value::Object(meta)) => meta,
        // mcp 2.3.0's words for the same rule (`shared/inbound.py`).
        _ => {
            return Err(ProtocolError::InvalidEnvelope(format!(
                "params._meta must be an object carrying the required '{META_PROTOCOL_VERSION}' and \
                 '{META_CLIENT_CAPABILITIES}' envelope keys"
            )));
        }
    };
    let missing: Vec<&str> =
        [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES].into_iter().filter(|k| !meta.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(ProtocolError::InvalidEnvelope(format!(
            "params._meta is missing the required envelope key(s): {}",
            missing.join(", ")
        )));
    }
    let protocol_version = match meta.get(META_PROTOCOL_VERSION) {
        Some(Value::String(version)) => version.as_str(),
        Some(_) => {
            return Err(ProtocolError::InvalidParams(format!("_meta[{META_PROTOCOL_VERSION:?}] must be a string")));
        }
        None => return Err(ProtocolError::InvalidParams(format!("_meta[{META_PROTOCOL_VERSION:?}] is required"))),
    };
    let client_capabilities = match meta.get(META_CLIENT_CAPABILITIES) {
        Some(Value::Object(caps)) => caps,
        Some(_) => {
            return Err(ProtocolError::InvalidParams(format!("_meta[{META_CLIENT_CAPABILITIES:?}] must be an object")));
        }
        None => {
            return Err(ProtocolError::InvalidParams(format!("_meta[{META_CLIENT_CAPABILITIES:?}] is required")));
        }
    };
    if let Some(exts) = client_capabilities.get("extensions")
        && !exts.is_object()
    {
        return Err(ProtocolError::InvalidParams("clientCapabilities.extensions must be an object".into()));
    }
    Ok(EnvelopeRef { protocol_version, client_capabilities, client_info: meta.get(META_CLIENT_INFO) })
}

/// True when a request claims the per-request envelope of the 2026-07-28 revision: its
/// `params._meta` carries the protocol-version key (whatever its value), or its
/// `MCP-Protocol-Version` header names a revision this crate speaks. A request without the claim
/// is 2025-era traffic, which an SDK serves through its own legacy path; the rule is the
/// TypeScript SDK 2.4.0's (`hasEnvelopeClaim`), so both sides classify a request alike.
pub fn claims_envelope(params: Option<&Value>, protocol_version_header: Option<&str>) -> bool {
    let in_body = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .is_some_and(|meta| meta.contains_key(META_PROTOCOL_VERSION));
    in_body || protocol_version_header.is_some_and(|v| SUPPORTED_VERSIONS.contains(&v.trim()))
}

/// Refuses a protocol version this crate does not speak with -32022.
pub fn check_version(requested: &str) -> Result<(), ProtocolError> {
    if SUPPORTED_VERSIONS.contains(&requested) {
        Ok(())
    } else {
        Err(ProtocolError::UnsupportedVersion {
            requested: requested.to_owned(),
            supported: SUPPORTED_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        })
    }
}

/// How a tool may run as a task. There is no per-tool declaration on the 2026-07-28 wire; the
/// server decides per request (SEP-2663,
/// <https://modelcontextprotocol.io/seps/2663-tasks-extension>).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskMode {
    /// Never a task.
    #[default]
    Forbidden,
    /// A task for a declaring client, synchronous otherwise.
    Optional,
    /// Always a task; a non-declaring client gets -32021.
    Required,
}

/// How one `tools/call` is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Run the tool and answer with its `CallToolResult`.
    Sync,
    /// Create a task and answer with a `CreateTaskResult`.
    Task,
}

/// Decides how a `tools/call` runs from the tool's mode and whether this request declared the
/// extension. A legacy `params.task` plays no part (SEP-2663 backward-compat table).
pub fn decide(mode: TaskMode, declares_tasks: bool) -> Result<Dispatch, ProtocolError> {
    match (mode, declares_tasks) {
        (TaskMode::Forbidden, _) | (TaskMode::Optional, false) => Ok(Dispatch::Sync),
        (TaskMode::Optional | TaskMode::Required, true) => Ok(Dispatch::Task),
        (TaskMode::Required, false) => Err(missing_tasks_capability("this tool")),
    }
}

/// The `ServerCapabilities` advertising the extension under `capabilities.extensions`.
pub fn server_capabilities() -> Value {
    json!({ "tools": {}, "extensions": { EXTENSION_ID: {} } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(caps: Value) -> Value {
        json!({"_meta": {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: caps}})
    }

    #[test]
    fn per_request_declaration() {
        let declaring = parse_envelope(Some(&params(json!({"extensions": {EXTENSION_ID: {}}})))).unwrap();
        assert!(declaring.declares_tasks());
        let plain = parse_envelope(Some(&params(json!({})))).unwrap();
        assert!(!plain.declares_tasks());
        assert_eq!(plain.require_tasks("tasks/get").unwrap_err().code(), -32021);
    }

    #[test]
    fn modes() {
        assert_eq!(decide(TaskMode::Forbidden, true).unwrap(), Dispatch::Sync);
        assert_eq!(decide(TaskMode::Optional, true).unwrap(), Dispatch::Task);
        assert_eq!(decide(TaskMode::Optional, false).unwrap(), Dispatch::Sync);
        assert_eq!(decide(TaskMode::Required, true).unwrap(), Dispatch::Task);
        let err = decide(TaskMode::Required, false).unwrap_err().to_rpc();
        assert_eq!(err.code, -32021);
        assert_eq!(err.data.unwrap()["requiredCapabilities"]["extensions"][EXTENSION_ID], json!({}));
    }

    /// The `requiredCapabilities` a check of `requests` against `caps` refuses with, or `None`.
    fn refused(caps: Value, requests: Value) -> Option<Value> {
        let (Value::Object(caps), Value::Object(requests)) = (caps, requests) else { panic!("objects") };
        check_input_requests(&caps, &requests).err().map(|e| {
            assert_eq!(e.code(), -32021);
            e.to_rpc().data.unwrap()["requiredCapabilities"].clone()
        })
    }

    #[test]
    fn input_requests_need_declared_capabilities() {
        let form = json!({"a": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {}}}});
        let url = json!({"a": {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x"}}});
        let sampling = json!({"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 9}}});
        let tools =
            json!({"s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 9, "tools": []}}});
        let choice = json!({"s": {"method": "sampling/createMessage", "params": {"toolChoice": {"mode": "auto"}}}});
        let roots = json!({"r": {"method": "roots/list"}});
        // Form mode: `elicitation.form`, or a bare `elicitation` declaring no mode.
        assert_eq!(refused(json!({}), form.clone()), Some(json!({"elicitation": {"form": {}}})));
        assert_eq!(refused(json!({"elicitation": {}}), form.clone()), None);
        assert_eq!(refused(json!({"elicitation": {"form": {}}}), form.clone()), None);
        assert_eq!(
            refused(json!({"elicitation": {"url": {}}}), form.clone()),
            Some(json!({"elicitation": {"form": {}}}))
        );
        // URL mode needs `elicitation.url`.
        assert_eq!(refused(json!({"elicitation": {}}), url.clone()), Some(json!({"elicitation": {"url": {}}})));
        assert_eq!(refused(json!({}), url.clone()), Some(json!({"elicitation": {"url": {}}})));
        assert_eq!(refused(json!({"elicitation": {"url": {}}}), url), None);
        // Sampling, and with tools or a tool choice `sampling.tools`.
        assert_eq!(refused(json!({"elicitation": {}}), sampling.clone()), Some(json!({"sampling": {}})));
        assert_eq!(refused(json!({"sampling": {}}), sampling), None);
        assert_eq!(refused(json!({"sampling": {}}), tools.clone()), Some(json!({"sampling": {"tools": {}}})));
        assert_eq!(refused(json!({}), tools.clone()), Some(json!({"sampling": {"tools": {}}})));
        assert_eq!(refused(json!({"sampling": {"tools": {}}}), tools), None);
        assert_eq!(refused(json!({"sampling": {}}), choice), Some(json!({"sampling": {"tools": {}}})));
        // Roots; the first request missing something is the one refused.
        assert_eq!(refused(json!({"roots": {}}), roots.clone()), None);
        let mut both = roots.as_object().unwrap().clone();
        both.extend(form.as_object().unwrap().clone());
        assert_eq!(refused(json!({"elicitation": {}}), Value::Object(both)), Some(json!({"roots": {}})));
        // Anything but the three kinds is a server bug.
        for bogus in [json!({"x": {"method": "future/ask"}}), json!({"x": {"params": {}}}), json!({"x": 1})] {
            let (Value::Object(caps), Value::Object(requests)) = (json!({}), bogus) else { unreachable!() };
            assert_eq!(check_input_requests(&caps, &requests).unwrap_err().code(), -32603);
        }
    }

    #[test]
    fn bad_envelopes() {
        assert_eq!(parse_envelope(None).unwrap_err().code(), -32602);
        assert_eq!(parse_envelope(Some(&json!({"_meta": 3}))).unwrap_err().code(), -32602);
        assert_eq!(parse_envelope(Some(&json!({"_meta": {}}))).unwrap_err().code(), -32602);
        let old = json!({"_meta": {META_PROTOCOL_VERSION: "2025-11-25", META_CLIENT_CAPABILITIES: {}}});
        let err = parse_envelope(Some(&old)).unwrap_err().to_rpc();
        assert_eq!(err.code, -32022);
        assert_eq!(err.data.unwrap()["requested"], "2025-11-25");
    }
}
