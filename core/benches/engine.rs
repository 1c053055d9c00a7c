//! Engine benchmarks (criterion): durable creates per second, alone and 64 at a time (group
//! commit), `tasks/get` per second on running (in-memory) and finished (SQLite) tasks, and the
//! resident memory each stored task costs at 100k tasks.
//!
//! `cargo bench -p mcp-tasks --bench engine` prints criterion's figures and, first, the RSS
//! report. Throughput lines are "elements/s" = tasks per second.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use mcp_tasks::store::{Durability, SqliteStore, TaskStore};
use mcp_tasks::{Engine, EngineConfig, TaskOptions};
use serde_json::json;
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn engine(dir: &tempfile::TempDir, durability: Durability) -> Engine {
    let store: Arc<dyn TaskStore> = Arc::new(SqliteStore::open_with(dir.path().join("bench.db"), durability).unwrap());
    // No recovery scan and no sweeper: measure the request paths alone.
    let config = EngineConfig { recover_orphans: false, ..EngineConfig::default() };
    Engine::builder(store).config(config).build().await.unwrap()
}

fn result() -> serde_json::Value {
    json!({"content": [{"type": "text", "text": "done"}], "isError": false})
}

fn creates(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("durable_create");
    group.throughput(Throughput::Elements(1)).measurement_time(Duration::from_secs(8));
    for (name, durability) in [("fsync", Durability::Full), ("normal", Durability::Normal)] {
        let dir = tempfile::tempdir().unwrap();
        let engine = rt.block_on(engine(&dir, durability));
        group.bench_function(BenchmarkId::new("single", name), |b| {
            b.to_async(&rt).iter(|| async {
                let (created, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
                std::mem::forget(ctx); // keep the work "running"; dropping would fail the task
                created
            });
        });
        {
            let clients = 64usize;
            group.bench_function(BenchmarkId::new(format!("concurrent{clients}"), name), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let engine = engine.clone();
                    async move {
                        let per = iters.div_ceil(clients as u64);
                        let start = Instant::now();
                        let joins: Vec<_> = (0..clients)
                            .map(|_| {
                                let engine = engine.clone();
                                tokio::spawn(async move {
                                    for _ in 0..per {
                                        let (_, ctx) =
                                            engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
                                        std::mem::forget(ctx);
                                    }
                                })
                            })
                            .collect();
                        for join in joins {
                            join.await.unwrap();
                        }
                        // Scale to the requested count: per * clients >= iters creates ran.
                        start.elapsed().mul_f64(iters as f64 / (per * clients as u64) as f64)
                    }
                });
            });
        }
    }
    group.finish();
}

/// `tasks/get` on: a running task (in memory); a recently finished one (in the bounded cache);
/// and finished tasks read cold from SQLite (20k of them round-robin, cache disabled).
fn gets(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let engine = rt.block_on(engine(&dir, Durability::Full));
    let cold_dir = tempfile::tempdir().unwrap();
    let cold = rt.block_on(async {
        let store: Arc<dyn TaskStore> =
            Arc::new(SqliteStore::open_with(cold_dir.path().join("cold.db"), Durability::Normal).unwrap());
        let config = EngineConfig { recover_orphans: false, finished_cache: 0, ..EngineConfig::default() };
        Engine::builder(store).config(config).build().await.unwrap()
    });
    let (live_id, finished_id, cold_ids) = rt.block_on(async {
        let (live, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        std::mem::forget(ctx);
        let (done, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
        ctx.complete(result()).await.unwrap();
        let mut cold_ids = Vec::new();
        for _ in 0..20_000 {
            let (created, ctx) = cold.create_task("p", "tool", TaskOptions::default()).await.unwrap();
            ctx.complete(result()).await.unwrap();
            cold_ids.push(created.task.task_id);
        }
        (live.task.task_id, done.task.task_id, Arc::new(cold_ids))
    });
    let mut group = c.benchmark_group("tasks_get");
    group.throughput(Throughput::Elements(1));
    let cases = [
        ("running", engine.clone(), Arc::new(vec![live_id])),
        ("finished_cached", engine.clone(), Arc::new(vec![finished_id])),
        ("finished_sqlite_cold", cold.clone(), cold_ids),
    ];
    for (name, engine, ids) in cases {
        for threads in [1u64, 2] {
            group.bench_function(BenchmarkId::new(format!("threads{threads}"), name), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (engine, ids) = (engine.clone(), ids.clone());
                    async move {
                        let per = iters.div_ceil(threads);
                        let start = Instant::now();
                        let joins: Vec<_> = (0..threads)
                            .map(|t| {
                                let (engine, ids) = (engine.clone(), ids.clone());
                                tokio::spawn(async move {
                                    for i in 0..per {
                                        let id = &ids[((i * threads + t) as usize) % ids.len()];
                                        std::hint::black_box(engine.get("p", id).await.unwrap());
                                    }
                                })
                            })
                            .collect();
                        for join in joins {
                            join.await.unwrap();
                        }
                        start.elapsed().mul_f64(iters as f64 / (per * threads) as f64)
                    }
                });
            });
        }
    }
    group.finish();
}

/// (VmRSS, RssAnon) of this process in KiB. RssAnon excludes file mappings (SQLite's mmap
/// reads), which are the OS page cache.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("RssAnon:"))
}

fn per_task(before: (u64, u64), after: (u64, u64), n: usize) -> String {
    let bytes = |a: u64, b: u64| (b.saturating_sub(a) * 1024) as f64 / n as f64;
    format!("{:.1} B/task RSS, {:.1} B/task anonymous", bytes(before.0, after.0), bytes(before.1, after.1))
}

/// Memory per stored task at 100k tasks. Finished tasks live only in the store, so the marginal
/// cost between 100k and 200k of them must be ~0 (SQLite's page cache is bounded); running tasks
/// are held in memory.
fn rss_report() {
    const N: usize = 100_000;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let engine = rt.block_on(engine(&dir, Durability::Normal));
    let finish_batch = || {
        rt.block_on(async {
            let joins: Vec<_> = (0..16)
                .map(|_| {
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        for _ in 0..N / 16 {
                            let (_, ctx) = engine.create_task("p", "tool", TaskOptions::default()).await.unwrap();
                            ctx.complete(result()).await.unwrap();
                        }
                    })
                })
                .collect();
            for join in joins {
                join.await.unwrap();
            }
        });
        rss_kib()
    };
    let start = rss_kib();
    let first = finish_batch();
    let second = finish_batch();
    let mut running = Vec::with_capacity(N);
    rt.block_on(async {
        for _ in 0..N {
            running.push(engine.create_task("p", "tool", TaskOptions::default()).await.unwrap().1);
        }
    });
    let live = rss_kib();
    println!("rss: start {} KiB ({} KiB anonymous)", start.0, start.1);
    println!(
        "rss: first {N} finished tasks: {} (includes filling SQLite's bounded page cache)",
        per_task(start, first, N)
    );
    println!("rss: next {N} finished tasks: {}", per_task(first, second, N));
    println!("rss: {N} running tasks: {}", per_task(second, live, N));
    rt.block_on(async {
        for ctx in running {
            ctx.complete(result()).await.unwrap();
        }
    });
    println!(
        "rss: {} stored, {} running in memory after they finished",
        rt.block_on(engine.store().count()).unwrap(),
        engine.live_count()
    );
}

fn main() {
    // The RSS report runs under `cargo bench` (which passes --bench; `cargo test` runs the
    // benchmarks once in test mode without it) with no filter or a filter naming "rss".
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let bench_mode = args.iter().any(|a| a == "--bench");
    if bench_mode && (filter.is_empty() || filter.iter().any(|f| f.contains("rss"))) {
        rss_report();
    }
    let mut c = Criterion::default().configure_from_args();
    creates(&mut c);
    gets(&mut c);
    c.final_summary();
}
