//! The host's connection loop against slow and hostile clients (`host::serve_with` with short
//! bounds): half-sent headers and idle connections are closed, a slow body gets the table's 408,
//! a header section over the limit 431, the cap sheds the oldest connection that completed no
//! request so a legitimate one is served, a listen stream outlives every bound, and one whose
//! reader stopped reading is closed after the stall bound while another on the same task gets
//! every state. A listen stream is written by the loop itself (not hyper): chunked, closing its
//! connection after the last chunk, on a connection that served other requests first, and it
//! ends (freeing its connection) when its reader goes away. Every wait is bounded; the bounds asserted are generous multiples of the
//! configured ones.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks::host::{Host, ServeLimits, Tool, handler_fn, serve_with, text_result};
use mcp_tasks::protocol::TaskMode;
use mcp_tasks::store::MemoryStore;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BOUND: Duration = Duration::from_secs(10);

fn limits() -> ServeLimits {
    ServeLimits {
        header_read_timeout: Duration::from_millis(300),
        body_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        max_connections: Some(8),
        max_header_bytes: 16 << 10,
        write_stall_timeout: Duration::from_millis(300),
    }
}

/// How long the `chatty` tool sets status messages (five times the stall bound: a reader that
/// stopped reading has full buffers and a write waiting for most of it), and how long each is.
const CHATTER: (Duration, usize) = (Duration::from_millis(1_500), 16 << 10);

async fn host(limits: ServeLimits) -> std::net::SocketAddr {
    host_with(limits, Arc::new(tokio::sync::Notify::new())).await
}

/// The host, its `chatty` tool starting to chatter when `go` is notified.
async fn host_with(limits: ServeLimits, go: Arc<tokio::sync::Notify>) -> std::net::SocketAddr {
    let engine = mcp_tasks::Engine::builder(Arc::new(MemoryStore::new())).build().await.unwrap();
    let chatty = handler_fn(move |_call, c| {
        let go = Arc::clone(&go);
        async move {
            go.notified().await;
            let started = std::time::Instant::now();
            // Bounded in count too, should the clock stall.
            for i in 0..1_000_000 {
                if started.elapsed() > CHATTER.0 {
                    break;
                }
                let mut message = format!("{i} ");
                message.extend(std::iter::repeat_n('x', CHATTER.1));
                c.set_status_message(message).await?;
                // The test's runtime has one thread: the streams are written between changes.
                tokio::task::yield_now().await;
            }
            Ok(text_result("said"))
        }
    });
    let host = Host::builder(engine)
        .tool(Tool::new("chatty", chatty).mode(TaskMode::Required).poll_interval_ms(60_000))
        .tool(Tool::new("echo", handler_fn(|_c, _x| async { Ok(text_result("hi")) })))
        .tool(
            Tool::new(
                "slow",
                handler_fn(|_c, _x| async {
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    Ok(text_result("done"))
                }),
            )
            .mode(TaskMode::Optional)
            .poll_interval_ms(60_000),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_with(listener, host.router("/mcp"), limits, std::future::pending()));
    addr
}

fn request(method: &str, params: Value, name: Option<&str>) -> Vec<u8> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let mut params = params;
    params["_meta"] = meta;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let name = name.map(|n| format!("Mcp-Name: {n}\r\n")).unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Calls `tool` (a task tool) on `conn`: its task's id.
async fn create(conn: &mut TcpStream, tool: &str) -> String {
    conn.write_all(&request("tools/call", json!({"name": tool, "arguments": {}}), Some(tool))).await.unwrap();
    let created = read_some(conn).await;
    let task: Value = serde_json::from_str(&created[created.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    task["result"]["taskId"].as_str().expect("a task").to_owned()
}

/// Reads until the server closes the connection (or `BOUND` passes: then panics).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(BOUND, stream.read(&mut buf)).await.expect("the server closes the connection") {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&all).into_owned(),
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one response head and the bytes received with it.
async fn read_some(stream: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 65536];
    let n = tokio::time::timeout(BOUND, stream.read(&mut buf)).await.expect("an answer").unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn a_half_sent_header_and_an_idle_connection_are_closed() {
    let addr = host(limits()).await;
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Ty").await.unwrap();
    assert_eq!(read_to_close(&mut half).await, "", "closed without an answer");
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert_eq!(read_to_close(&mut silent).await, "", "a connection that sends nothing owes a header too");
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(&request("tools/call", json!({"name": "echo", "arguments": {}}), Some("echo"))).await.unwrap();
    let answer = read_to_close(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"text\":\"hi\""), "served before it idled out: {answer}");
}

#[tokio::test]
async fn a_slow_body_gets_408_and_an_oversized_header_431() {
    let addr = host(limits()).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    )
    .await
    .unwrap();
    let answer = read_some(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":-32600") && answer.contains("did not arrive"), "{answer}");
    let mut big = TcpStream::connect(addr).await.unwrap();
    let name = "x".repeat(20 << 10);
    big.write_all(&request("tasks/get", json!({"taskId": name}), Some(&name))).await.unwrap();
    let answer = read_to_close(&mut big).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
}

#[tokio::test]
async fn at_the_cap_the_oldest_unfinished_connection_makes_room() {
    let addr = host(ServeLimits { header_read_timeout: Duration::from_secs(60), ..limits() }).await;
    let mut flood = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        flood.push(stream);
    }
    // A ninth, legitimate connection is served while all eight are held.
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe.write_all(&request("tools/call", json!({"name": "echo", "arguments": {}}), Some("echo"))).await.unwrap();
    let answer = read_some(&mut probe).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("\"text\":\"hi\""), "{answer}");
    // The first of the flood went to make room.
    assert_eq!(read_to_close(&mut flood[0]).await, "");
}

#[tokio::test]
async fn a_listen_stream_outlives_every_bound() {
    let addr = host(limits()).await;
    let mut call = TcpStream::connect(addr).await.unwrap();
    let id = create(&mut call, "slow").await;
    let mut listen = TcpStream::connect(addr).await.unwrap();
    listen
        .write_all(&request("subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), None))
        .await
        .unwrap();
    // The task completes after 1.5 s, five times every bound: the stream is still there for it.
    let stream = read_to_close(&mut listen).await;
    let (head, events) = dechunk(&stream);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    for line in ["content-type: text/event-stream", "transfer-encoding: chunked", "connection: close", "date: "] {
        assert!(head.to_ascii_lowercase().contains(line), "{line} in {head}");
    }
    assert!(events.contains("\"status\":\"completed\""), "{events}");
    assert!(events.contains("\"resultType\":\"complete\""), "the graceful close: {events}");
}

/// Splits a chunked response read to its end into its head and its body, checking every chunk's
/// size line and that the body ended with the last chunk.
fn dechunk(response: &str) -> (String, String) {
    let (head, mut rest) = response.split_once("\r\n\r\n").expect("a head");
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
        if size == 0 {
            assert_eq!(after, "\r\n", "nothing after the last chunk");
            return (head.to_owned(), body);
        }
        body.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").expect("a chunk ends with CRLF");
    }
}

#[tokio::test]
async fn a_listen_after_other_requests_on_its_connection_and_pipelined_behind_one() {
    let addr = host(limits()).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let id = create(&mut conn, "slow").await;
    // The same keep-alive connection: a tasks/get and the listen sent together, so the listen's
    // head may be read before the get's answer has gone out.
    let mut both = request("tasks/get", json!({"taskId": id}), Some(&id));
    both.extend(request("subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), None));
    conn.write_all(&both).await.unwrap();
    let all = read_to_close(&mut conn).await;
    let (get, listen) =
        all.split_at(all.find("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream").expect("the listen's head"));
    assert!(get.starts_with("HTTP/1.1 200"), "{get}");
    assert!(get.contains("\"status\":\"working\""), "{get}");
    let (_, events) = dechunk(listen);
    assert!(events.contains("\"status\":\"completed\""), "{events}");
    assert!(events.contains("\"resultType\":\"complete\""), "{events}");
}

#[tokio::test]
async fn a_listen_whose_reader_went_away_frees_its_connection() {
    // `chatty` never finishes here (nobody says go): only the readers' leaving ends the streams.
    let addr = host(limits()).await;
    let mut call = TcpStream::connect(addr).await.unwrap();
    let id = create(&mut call, "chatty").await;
    drop(call);
    let listen = request("subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), None);
    // As many streams as the cap: while they are open, every connection is serving a request.
    let cap = limits().max_connections.unwrap();
    let mut streams = Vec::new();
    for _ in 0..cap {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(&listen).await.unwrap();
        assert!(read_some(&mut stream).await.starts_with("HTTP/1.1 200"));
        streams.push(stream);
    }
    drop(streams);
    // Once the host has seen them go, a new request is served (it would be refused at the cap
    // with every connection busy). Bounded in tries and time.
    let started = std::time::Instant::now();
    for _ in 0..200 {
        let mut echo = TcpStream::connect(addr).await.unwrap();
        echo.write_all(&request("tools/call", json!({"name": "echo", "arguments": {}}), Some("echo"))).await.unwrap();
        if read_to_close_or_answer(&mut echo).await.starts_with("HTTP/1.1 200") {
            return;
        }
        assert!(started.elapsed() < BOUND, "the readers' connections were never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the readers' connections were never freed");
}

/// The first bytes of an answer, or "" when the server closed the connection unanswered.
async fn read_to_close_or_answer(stream: &mut TcpStream) -> String {
    let mut buf = vec![0u8; 65536];
    match tokio::time::timeout(BOUND, stream.read(&mut buf)).await.expect("an answer or a close") {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(_) => String::new(),
    }
}

#[tokio::test]
async fn a_reader_that_stops_reading_is_closed_and_the_others_get_every_state() {
    let go = Arc::new(tokio::sync::Notify::new());
    let addr = host_with(limits(), Arc::clone(&go)).await;
    let mut call = TcpStream::connect(addr).await.unwrap();
    let id = create(&mut call, "chatty").await;
    let listen = request("subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), None);
    // The stalled reader takes its response head and acknowledgement, then reads nothing; its
    // small receive buffer fills at once.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled.write_all(&listen).await.unwrap();
    assert!(read_some(&mut stalled).await.starts_with("HTTP/1.1 200"));
    let mut reader = TcpStream::connect(addr).await.unwrap();
    reader.write_all(&listen).await.unwrap();
    assert!(read_some(&mut reader).await.starts_with("HTTP/1.1 200"));
    go.notify_one();
    let all = read_to_close(&mut reader).await;
    assert!(all.contains("\"status\":\"completed\""), "the reading stream saw the end");
    assert!(all.contains("\"resultType\":\"complete\""), "and its graceful close");
    // The stall began within the first of the tool's 1.5 s; its bound is 300 ms: the connection
    // is closed by now.
    let held = read_to_close(&mut stalled).await;
    assert!(held.len() < all.len(), "the stalled stream got {} bytes, the reader {}", held.len(), all.len());
    assert!(!held.contains("\"resultType\":\"complete\""), "it ended without the listen's close");
    assert!(!held.ends_with("0\r\n\r\n"), "and without its chunked body's end");
}
