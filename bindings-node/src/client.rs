//! Glue for `mcp_tasks::client`: the task client, its executions, and a JavaScript async function
//! as the input handler. JSON crosses the boundary as strings.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_tasks::client::{Client, ClientOptions, Execution, InputError, InputHandler, TaskExecution};
use mcp_tasks::protocol::client::InputRequest;
use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::Value;

use crate::error::{client_error, parse_json, protocol_error};

/// `(requestJson) => Promise<responseJson | null>`, the request being core's `InputRequest`.
type InputFn = ThreadsafeFunction<String, Promise<Option<String>>, String, napi::Status, false, true>;

/// Calls the JavaScript input handler for each input request, on the JS thread.
struct JsInputHandler(Arc<InputFn>);

#[async_trait]
impl InputHandler for JsInputHandler {
    async fn handle(&self, request: InputRequest) -> Result<Option<Value>, InputError> {
        let request = serde_json::to_string(&request).expect("requests serialize");
        let answer = match self.0.call_async_catch(request).await {
            Ok(promise) => promise.await,
            Err(e) => Err(e),
        };
        match answer {
            // The TypeScript side sends what `JSON.stringify` made of the handler's answer.
            Ok(Some(text)) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| InputError::new(format!("the input handler's answer is not JSON: {e}"))),
            Ok(None) => Ok(None),
            // What the handler threw ends the call with it as the cause (the TypeScript side
            // keeps the thrown value itself for `cause`).
            Err(e) => Err(InputError::new(e.reason.clone())),
        }
    }
}

/// The task client for one server: a Streamable HTTP endpoint or a stdio command.
#[napi]
pub struct NativeClient {
    inner: Client,
}

#[napi]
impl NativeClient {
    /// Builds the client from core's `ClientOptions` (JSON, camelCase; absent fields take core's
    /// defaults); `input_handler` answers input requests (MRTR rounds and tasks) with core's
    /// `InputRequest` (JSON).
    #[napi(constructor)]
    pub fn new(
        options_json: String,
        #[napi(ts_arg_type = "(requestJson: string) => Promise<string | null>")] input_handler: Option<InputFn>,
    ) -> napi::Result<Self> {
        let options: ClientOptions = serde_json::from_value(parse_json("options", &options_json)?).map_err(|e| {
            protocol_error(&mcp_tasks::protocol::ProtocolError::InvalidParams(format!("client options: {e}")))
        })?;
        let mut builder = options.builder().map_err(client_error)?;
        if let Some(handler) = input_handler {
            builder = builder.input_handler(JsInputHandler(Arc::new(handler)));
        }
        Ok(Self { inner: builder.build().map_err(client_error)? })
    }

    /// Calls a tool: an immediate result, or a task to follow. `trace_json` is the caller's W3C
    /// trace context (a propagator's carrier as JSON), sent with the call and every request about
    /// its task; an invalid one is ignored.
    #[napi]
    pub async fn call_tool(
        &self,
        name: String,
        arguments_json: String,
        trace_json: Option<String>,
    ) -> napi::Result<NativeCall> {
        let arguments = parse_json("arguments", &arguments_json)?;
        let trace = trace_json.as_deref().and_then(mcp_tasks::trace::TraceContext::from_carrier_json);
        match self.inner.call_tool_traced(&name, arguments, trace).await.map_err(client_error)? {
            Execution::Immediate(result) => Ok(NativeCall { payload: result.to_string(), task: None }),
            Execution::Task(task) => {
                let created = serde_json::to_string(&task.latest()).expect("tasks serialize");
                Ok(NativeCall { payload: created, task: Some(NativeTaskExecution::new(task)) })
            }
        }
    }

    /// Stops following every task (references stay for `resumeAll`) and closes the transport
    /// (a stdio server's child ends); later calls fail with `TransportError`.
    #[napi]
    pub async fn close(&self) {
        self.inner.close().await;
    }

    /// Re-attaches to every persisted task whose outcome was not delivered yet.
    #[napi]
    pub async fn resume_all(&self) -> napi::Result<Vec<NativeTaskExecution>> {
        let tasks = self.inner.resume_all().await.map_err(client_error)?;
        Ok(tasks.into_iter().map(NativeTaskExecution::new).collect())
    }
}

/// What `callTool` answered: `payload` is the `CallToolResult` JSON (no task) or the created
/// task's JSON (with `task`).
#[napi]
pub struct NativeCall {
    payload: String,
    task: Option<NativeTaskExecution>,
}

#[napi]
impl NativeCall {
    /// The result or created task, as JSON.
    #[napi(getter)]
    pub fn payload(&self) -> String {
        self.payload.clone()
    }

    /// The task being followed; `null` for an immediate result or once taken.
    #[napi]
    pub fn take_task(&mut self) -> Option<NativeTaskExecution> {
        self.task.take()
    }
}

/// A task being followed. Following stops when the object is garbage-collected.
#[napi]
pub struct NativeTaskExecution {
    task_id: String,
    inner: Arc<TaskExecution>,
}

impl NativeTaskExecution {
    fn new(task: TaskExecution) -> Self {
        Self { task_id: task.task_id().to_owned(), inner: Arc::new(task) }
    }
}

#[napi]
impl NativeTaskExecution {
    /// The task id.
    #[napi(getter)]
    pub fn task_id(&self) -> String {
        self.task_id.clone()
    }

    /// The latest state seen (`DetailedTask` JSON).
    #[napi]
    pub fn latest(&self) -> String {
        serde_json::to_string(&self.inner.latest()).expect("tasks serialize")
    }

    /// The next state (JSON), or `null` once the task has an outcome.
    #[napi]
    pub async fn next_update(&self) -> Option<String> {
        let next = self.inner.next_update().await;
        next.map(|task| serde_json::to_string(&task).expect("tasks serialize"))
    }

    /// Waits for the outcome (JSON `{"kind": "completed", "result"}`, `failed` with `error`,
    /// `cancelled`, `gone`, `expired`) and marks it delivered.
    #[napi]
    pub async fn result(&self) -> napi::Result<String> {
        let outcome = self.inner.result().await.map_err(client_error)?;
        Ok(serde_json::to_string(&outcome).expect("outcomes serialize"))
    }

    /// Sends `tasks/cancel`; `mode` is `stop` (the outcome becomes cancelled once acknowledged)
    /// or `observe` (keep following until the server's final state).
    #[napi]
    pub fn cancel(&self, mode: String) -> napi::Result<()> {
        self.inner.cancel(crate::protocol::cancel_mode(&mode)?).map_err(client_error)
    }

    /// Answers input request `key` with `response_json`; rejects (`InvalidParamsError`) a key the
    /// server never asked, one already answered, or a finished task.
    #[napi]
    pub async fn answer(&self, key: String, response_json: String) -> napi::Result<()> {
        let response = parse_json("response", &response_json)?;
        self.inner.answer(&key, response).await.map_err(client_error)
    }
}
