//! Store benchmarks for many workers (criterion): durable creates per second and `tasks/get` per
//! second of tasks another worker created (reads that reach the store), with 64 concurrent
//! clients spread over 1 or 3 workers on PostgreSQL, side by side with one worker on SQLite
//! (fsync per group commit). Each worker is an engine with its own store and connection pool, in
//! this process; all of them share the machine's 2 cores with the database server.
//!
//! `MCP_TASKS_PG_URL=$(tests/pg/start) cargo bench -p mcp-tasks --features postgres --bench postgres`
//! Without `MCP_TASKS_PG_URL` only the SQLite rows run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use mcp_tasks::store::{PostgresStore, SqliteStore, TaskStore};
use mcp_tasks::{Engine, EngineConfig, TaskOptions};
use serde_json::json;
use tokio::runtime::Runtime;

const CLIENTS: usize = 64;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn config() -> EngineConfig {
    // Reads must reach the store, as a read on a worker that does not run the task does.
    EngineConfig { recover_orphans: false, finished_cache: 0, ..EngineConfig::default() }
}

async fn fresh_database(base: &str) -> String {
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let name = format!("mcp_tasks_bench_{}", std::process::id());
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).await.unwrap();
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    format!("{}/{name}", &base[..base.rfind('/').unwrap()])
}

/// The setups measured: a name and its workers.
async fn setups(dir: &tempfile::TempDir) -> Vec<(String, Vec<Engine>)> {
    let sqlite: Arc<dyn TaskStore> = Arc::new(SqliteStore::open(dir.path().join("bench.db")).unwrap());
    let mut setups =
        vec![("sqlite-1-worker".to_owned(), vec![Engine::builder(sqlite).config(config()).build().await.unwrap()])];
    match std::env::var("MCP_TASKS_PG_URL") {
        Ok(base) => {
            let url = fresh_database(&base).await;
            for workers in [1usize, 3] {
                let mut engines = Vec::new();
                for _ in 0..workers {
                    let store = Arc::new(PostgresStore::connect(&url).await.unwrap());
                    engines.push(Engine::builder(store).config(config()).build().await.unwrap());
                }
                setups.push((format!("postgres-{workers}-workers"), engines));
            }
        }
        Err(_) => eprintln!("MCP_TASKS_PG_URL is not set: only the SQLite rows run (tests/pg/start starts a server)"),
    }
    setups
}

/// Runs `per` operations on each of CLIENTS clients spread round-robin over `engines`; returns
/// the time scaled to `iters` operations.
async fn spread<F, Fut>(engines: &[Engine], iters: u64, op: F) -> Duration
where
    F: Fn(Engine, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let per = iters.div_ceil(CLIENTS as u64);
    let start = Instant::now();
    let joins: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let engine = engines[client % engines.len()].clone();
            let op = op.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    op(engine.clone(), i).await;
                }
            })
        })
        .collect();
    for join in joins {
        join.await.unwrap();
    }
    start.elapsed().mul_f64(iters as f64 / (per * CLIENTS as u64) as f64)
}

fn workers(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let setups = rt.block_on(setups(&dir));
    let mut group = c.benchmark_group("workers");
    group.throughput(Throughput::Elements(1)).measurement_time(Duration::from_secs(8));
    for (name, engines) in &setups {
        group.bench_function(BenchmarkId::new("create", name), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let engines = engines.clone();
                async move {
                    spread(&engines, iters, |engine, _| async move {
                        let (_, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
                        std::mem::forget(ctx); // keep it running; dropping would fail it
                    })
                    .await
                }
            });
        });
        // 2,000 finished tasks created on the first worker, read round-robin through all.
        let ids: Arc<Vec<String>> = Arc::new(rt.block_on(async {
            let mut ids = Vec::new();
            for _ in 0..2_000 {
                let (created, ctx) = engines[0].create_task("p", "tool", TaskOptions::default()).await.unwrap();
                ctx.complete(json!({"content": [{"type": "text", "text": "done"}]})).await.unwrap();
                ids.push(created.task.task_id);
            }
            ids
        }));
        group.bench_function(BenchmarkId::new("get_finished", name), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (engines, ids) = (engines.clone(), Arc::clone(&ids));
                async move {
                    spread(&engines, iters, move |engine, i| {
                        let id = ids[i as usize % ids.len()].clone();
                        async move {
                            engine.get("p", &id).await.unwrap();
                        }
                    })
                    .await
                }
            });
        });
    }
    group.finish();
}

criterion::criterion_group!(benches, workers);
criterion::criterion_main!(benches);
