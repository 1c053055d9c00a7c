//! The contract every [`TaskStore`] keeps, as a suite (feature `store-contract`): the checks the
//! memory, SQLite and PostgreSQL stores pass in this repository's tests, exported so a store
//! written elsewhere can run them from its own tests.
//!
//! ```ignore
//! struct Mine;
//! #[async_trait::async_trait]
//! impl mcp_tasks::store::contract::StoreUnderTest for Mine {
//!     async fn fresh(&self) -> Arc<dyn TaskStore> { /* a new, empty store */ }
//!     async fn again(&self, store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>> { /* reopen */ }
//! }
//! mcp_tasks::store::contract::assert_contract(&Mine).await;
//! ```
//!
//! What is checked, by name: `insert_then_get`, `compare_and_set`, `terminal_rows_are_frozen`,
//! `unfinished_lists_live_tasks`, `expiry_and_purge`, `insert_within_caps`,
//! `operator_purge_takes_terminal_tasks_only`, `claims_take_each_waiting_task_once`,
//! `history_goes_with_its_change`, and, when
//! [`StoreUnderTest::again`] gives another handle, `durable_across_handles`; on a
//! [shared](TaskStore::shared) store also `change_feed` and `leases`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;

use super::{LiveQuota, StoreError, TaskStore, UpdateOutcome};
use crate::protocol::history::HISTORY_LIMIT;
use crate::protocol::{HistoryEntry, QuotaScope, TaskEvent, TaskHistory, TaskRecord};

/// Hands the suite the stores it checks.
#[async_trait]
pub trait StoreUnderTest: Send + Sync {
    /// A new, empty store (each check takes its own).
    async fn fresh(&self) -> Arc<dyn TaskStore>;

    /// Another handle on the data of `store`: what a restarted process opens (a single-process
    /// store may close `store` first), or another worker on a shared store; `None` when the data
    /// does not outlive its handle (an in-memory store).
    async fn again(&self, store: Arc<dyn TaskStore>) -> Option<Arc<dyn TaskStore>>;
}

/// A start time far from zero, so expiry arithmetic is exercised.
const NOW: u64 = 1_788_264_000_000;

fn record(id: &str, principal: &str, owner: &str, ttl_ms: Option<u64>) -> TaskRecord {
    TaskRecord::new(id.into(), principal.into(), owner.into(), "tool".into(), NOW, ttl_ms, Some(1_000))
}

/// `record` after `event` (a new version).
fn after(record: &TaskRecord, event: TaskEvent) -> TaskRecord {
    let mut next = record.clone();
    next.apply(NOW + 1, event).expect("the contract's own events apply");
    next
}

/// `record` after `event` at `now`, with the history entries the change makes.
fn changed(record: &TaskRecord, now: u64, event: TaskEvent) -> (Arc<TaskRecord>, Vec<HistoryEntry>) {
    let mut next = record.clone();
    let applied = next.apply(now, event).expect("the contract's own events apply");
    (Arc::new(next), applied.history)
}

fn same(a: &TaskRecord, b: &TaskRecord) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}

type Check = Result<(), String>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(what()) }
}

fn store_err(e: StoreError) -> String {
    format!("store error: {e}")
}

async fn insert_then_get(store: Arc<dyn TaskStore>) -> Check {
    let task = Arc::new(record("c-1", "alice", "w1", Some(60_000)));
    store.insert(&task).await.map_err(store_err)?;
    let got = store.get("c-1").await.map_err(store_err)?;
    ensure(got.as_ref().is_some_and(|g| same(g, &task)), || format!("get returned {got:?}, not the inserted record"))?;
    ensure(store.get("c-missing").await.map_err(store_err)?.is_none(), || "an unknown id was found".into())?;
    let again = store.insert(&task).await;
    ensure(matches!(again, Err(StoreError::Duplicate(_))), || format!("a second insert of one id gave {again:?}"))?;
    ensure(store.count().await.map_err(store_err)? == 1, || "count is not 1 after one insert".into())
}

async fn compare_and_set(store: Arc<dyn TaskStore>) -> Check {
    let task = record("c-2", "alice", "w1", None);
    store.insert(&Arc::new(task.clone())).await.map_err(store_err)?;
    let next = Arc::new(after(&task, TaskEvent::SetStatusMessage("step 1".into())));
    let stale = store.update(&next, task.version + 7, &[]).await.map_err(store_err)?;
    ensure(stale == UpdateOutcome::Conflict, || "an update with a stale version was written".into())?;
    let kept = store.get("c-2").await.map_err(store_err)?;
    ensure(kept.is_some_and(|k| same(&k, &task)), || "a refused update changed the record".into())?;
    let written = store.update(&next, task.version, &[]).await.map_err(store_err)?;
    ensure(written == UpdateOutcome::Written, || "an update with the stored version was refused".into())?;
    let got = store.get("c-2").await.map_err(store_err)?;
    ensure(got.is_some_and(|g| same(&g, &next)), || "the written update is not what get returns".into())?;
    let again = store.update(&next, task.version, &[]).await.map_err(store_err)?;
    ensure(again == UpdateOutcome::Conflict, || "the same version was written twice".into())
}

async fn terminal_rows_are_frozen(store: Arc<dyn TaskStore>) -> Check {
    let task = record("c-3", "alice", "w1", None);
    store.insert(&Arc::new(task.clone())).await.map_err(store_err)?;
    let done = after(&task, TaskEvent::Complete(json!({"content": []})));
    ensure(
        store.update(&Arc::new(done.clone()), task.version, &[]).await.map_err(store_err)? == UpdateOutcome::Written,
        || "completing the task was refused".into(),
    )?;
    // A forged change that skips the transition function: the store itself must refuse it.
    let mut forged = done.clone();
    forged.status = crate::protocol::TaskStatus::Working;
    forged.version += 1;
    let refused = store.update(&Arc::new(forged), done.version, &[]).await;
    ensure(matches!(refused, Ok(UpdateOutcome::Conflict) | Err(_)), || "a terminal row was changed".into())?;
    let got = store.get("c-3").await.map_err(store_err)?;
    ensure(got.is_some_and(|g| same(&g, &done)), || "the terminal row is not as it was written".into())
}

async fn unfinished_lists_live_tasks(store: Arc<dyn TaskStore>) -> Check {
    for (id, owner) in [("c-4a", "w1"), ("c-4b", "w2"), ("c-4c", "w1")] {
        store.insert(&Arc::new(record(id, "alice", owner, None))).await.map_err(store_err)?;
    }
    let c = store.get("c-4c").await.map_err(store_err)?.ok_or("c-4c vanished")?;
    store.update(&Arc::new(after(&c, TaskEvent::Cancel)), c.version, &[]).await.map_err(store_err)?;
    let mut all: Vec<String> =
        store.unfinished(None, 100).await.map_err(store_err)?.into_iter().map(|t| t.id).collect();
    all.sort();
    ensure(all == ["c-4a", "c-4b"], || format!("unfinished(None) gave {all:?}"))?;
    let mine: Vec<String> =
        store.unfinished(Some("w1"), 100).await.map_err(store_err)?.into_iter().map(|t| t.id).collect();
    ensure(mine == ["c-4a"], || format!("unfinished(Some(w1)) gave {mine:?}"))?;
    let one = store.unfinished(None, 1).await.map_err(store_err)?;
    ensure(one.len() == 1, || format!("unfinished with limit 1 gave {} tasks", one.len()))
}

async fn expiry_and_purge(store: Arc<dyn TaskStore>) -> Check {
    store.insert(&Arc::new(record("c-5a", "alice", "w1", Some(1_000)))).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-5b", "alice", "w1", Some(5_000)))).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-5c", "alice", "w1", None))).await.map_err(store_err)?;
    let due: Vec<String> =
        store.expired_unfinished(NOW + 1_000, 100).await.map_err(store_err)?.into_iter().map(|t| t.id).collect();
    ensure(due == ["c-5a"], || format!("expired_unfinished at its TTL gave {due:?}"))?;
    let a = store.get("c-5a").await.map_err(store_err)?.ok_or("c-5a vanished")?;
    store.update(&Arc::new(after(&a, TaskEvent::Expire)), a.version, &[]).await.map_err(store_err)?;
    let due = store.expired_unfinished(NOW + 1_000, 100).await.map_err(store_err)?;
    ensure(due.is_empty(), || "an expired (terminal) task is still listed as expired_unfinished".into())?;
    let purged = store.purge(NOW + 1_000, 100).await.map_err(store_err)?;
    ensure(purged == 1, || format!("purge at c-5a's TTL deleted {purged}"))?;
    ensure(store.get("c-5a").await.map_err(store_err)?.is_none(), || "a purged task is still readable".into())?;
    ensure(store.get("c-5b").await.map_err(store_err)?.is_some(), || "purge deleted a task before its TTL".into())?;
    ensure(store.count().await.map_err(store_err)? == 2, || "count after purge is not 2".into())
}

async fn operator_purge_takes_terminal_tasks_only(store: Arc<dyn TaskStore>) -> Check {
    // c-8a completes at NOW + 1; c-8b is live; c-8c's TTL ended but nothing expired it yet.
    let a = record("c-8a", "alice", "w1", None);
    store.insert(&Arc::new(a.clone())).await.map_err(store_err)?;
    store
        .update(&Arc::new(after(&a, TaskEvent::Complete(json!({"content": []})))), a.version, &[])
        .await
        .map_err(store_err)?;
    store.insert(&Arc::new(record("c-8b", "alice", "w1", None))).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-8c", "alice", "w1", Some(1_000)))).await.map_err(store_err)?;
    let none = store.purge_finished(NOW + 5_000, NOW, 100).await.map_err(store_err)?;
    ensure(none == 0, || format!("a purge of tasks last changed before c-8a's completion deleted {none}"))?;
    let one = store.purge_finished(NOW + 5_000, NOW + 1, 100).await.map_err(store_err)?;
    ensure(one == 1, || format!("a purge at c-8a's completion deleted {one}, not 1"))?;
    ensure(store.get("c-8a").await.map_err(store_err)?.is_none(), || "the purged terminal task is readable".into())?;
    ensure(store.count().await.map_err(store_err)? == 2, || "an operator's purge deleted a live task".into())
}

async fn purging_named_tasks_takes_terminal_ones_only(store: Arc<dyn TaskStore>) -> Check {
    // c-9a completes; c-9b is live; "c-9z" is unknown.
    let a = record("c-9a", "alice", "w1", None);
    store.insert(&Arc::new(a.clone())).await.map_err(store_err)?;
    let (done, entries) = changed(&a, NOW + 1, TaskEvent::Complete(json!({"content": []})));
    store.update(&done, a.version, &entries).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-9b", "alice", "w1", None))).await.map_err(store_err)?;
    let ids = ["c-9a", "c-9b", "c-9z"].map(str::to_owned);
    let deleted = store.purge_tasks(&ids).await.map_err(store_err)?;
    ensure(deleted == 1, || format!("a purge of one terminal, one live and one unknown task deleted {deleted}"))?;
    ensure(store.get("c-9a").await.map_err(store_err)?.is_none(), || "the purged task is readable".into())?;
    let history = store.history("c-9a").await.map_err(store_err)?;
    ensure(history.entries.is_empty(), || format!("the purged task's history stayed: {history:?}"))?;
    ensure(store.get("c-9b").await.map_err(store_err)?.is_some(), || "a purge of named tasks deleted a live one".into())
}

async fn insert_within_caps(store: Arc<dyn TaskStore>) -> Check {
    let quota = LiveQuota { per_principal: Some(1), total: Some(2) };
    store.insert_within(&Arc::new(record("c-6a", "alice", "w1", None)), quota).await.map_err(store_err)?;
    let over = store.insert_within(&Arc::new(record("c-6b", "alice", "w1", None)), quota).await;
    ensure(matches!(over, Err(StoreError::QuotaExceeded { scope: QuotaScope::Principal, limit: 1 })), || {
        format!("alice's second live task gave {over:?}")
    })?;
    ensure(store.get("c-6b").await.map_err(store_err)?.is_none(), || "a refused insert was written".into())?;
    store.insert_within(&Arc::new(record("c-6c", "bob", "w1", None)), quota).await.map_err(store_err)?;
    let over = store.insert_within(&Arc::new(record("c-6d", "carol", "w1", None)), quota).await;
    ensure(matches!(over, Err(StoreError::QuotaExceeded { scope: QuotaScope::Server, limit: 2 })), || {
        format!("a third live task gave {over:?}")
    })?;
    let a = store.get("c-6a").await.map_err(store_err)?.ok_or("c-6a vanished")?;
    store.update(&Arc::new(after(&a, TaskEvent::Cancel)), a.version, &[]).await.map_err(store_err)?;
    store
        .insert_within(&Arc::new(record("c-6b", "alice", "w1", None)), quota)
        .await
        .map_err(|e| format!("a finished task did not free its place: {e}"))
}

async fn durable_across_handles(again: &Arc<dyn TaskStore>, latest: &TaskRecord) -> Check {
    let got = again.get(&latest.id).await.map_err(store_err)?;
    ensure(got.is_some_and(|g| same(&g, latest)), || "another handle does not read the acknowledged write".into())?;
    // The write's history entry came with it.
    let history = again.history(&latest.id).await.map_err(store_err)?;
    let message = HistoryEntry {
        at_ms: latest.updated_at_ms,
        event: crate::protocol::HistoryEvent::Message { message: "before the restart".into() },
    };
    ensure(history.entries.len() == 2 && history.entries.back() == Some(&message), || {
        format!("another handle reads the history {history:?}")
    })
}

async fn change_feed(one: &Arc<dyn TaskStore>, two: &Arc<dyn TaskStore>) -> Check {
    let mut feed = two.changes().ok_or("a shared store offers no change feed")?;
    let task = record("c-8", "alice", "w1", None);
    one.insert(&Arc::new(task.clone())).await.map_err(store_err)?;
    one.update(&Arc::new(after(&task, TaskEvent::SetStatusMessage("moved".into()))), task.version, &[])
        .await
        .map_err(store_err)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, feed.recv()).await {
            Ok(Ok(id)) if id == "c-8" => return Ok(()),
            Ok(Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
            _ => return Err("another handle's change feed did not report the update within 10 s".into()),
        }
    }
}

async fn leases(store: &Arc<dyn TaskStore>) -> Check {
    store.insert(&Arc::new(record("c-9a", "alice", "w-live", None))).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-9b", "alice", "w-never", None))).await.map_err(store_err)?;
    let mut waiting = record("c-9c", "alice", "", None);
    waiting.runnable_at_ms = Some(NOW);
    store.insert(&Arc::new(waiting)).await.map_err(store_err)?;
    store.renew_lease("w-live", NOW + 15_000).await.map_err(store_err)?;
    let ids = |tasks: Vec<TaskRecord>| {
        let mut ids: Vec<String> = tasks.into_iter().map(|t| t.id).filter(|id| id.starts_with("c-9")).collect();
        ids.sort();
        ids
    };
    let now = ids(store.orphaned(NOW, 100).await.map_err(store_err)?);
    ensure(now == ["c-9b"], || format!("orphaned while w-live holds its lease gave {now:?}"))?;
    let later = ids(store.orphaned(NOW + 15_000, 100).await.map_err(store_err)?);
    // c-9c waits for a worker: no owner, nothing to lose.
    ensure(later == ["c-9a", "c-9b"], || format!("orphaned once the lease lapsed gave {later:?}"))
}

/// A task that waits for a worker (no owner, `runnable_at_ms` set), in the store's own words.
fn waiting(id: &str, tool: &str, runnable_at_ms: u64) -> TaskRecord {
    let mut task = TaskRecord::new(id.into(), "alice".into(), String::new(), tool.into(), NOW, None, Some(1_000));
    task.attempt = 0;
    task.runnable_at_ms = Some(runnable_at_ms);
    task
}

async fn claims_take_each_waiting_task_once(store: Arc<dyn TaskStore>) -> Check {
    let ready: Vec<TaskRecord> = (0..8).map(|n| waiting(&format!("c-10-{n}"), "tool", NOW)).collect();
    for task in &ready {
        store.insert(&Arc::new(task.clone())).await.map_err(store_err)?;
    }
    store.insert(&Arc::new(waiting("c-10-later", "tool", NOW + 60_000))).await.map_err(store_err)?;
    store.insert(&Arc::new(waiting("c-10-other", "other", NOW))).await.map_err(store_err)?;
    store.insert(&Arc::new(record("c-10-running", "alice", "w1", None))).await.map_err(store_err)?;
    let cancelled = waiting("c-10-cancelled", "tool", NOW);
    store.insert(&Arc::new(cancelled.clone())).await.map_err(store_err)?;
    store.update(&Arc::new(after(&cancelled, TaskEvent::Cancel)), cancelled.version, &[]).await.map_err(store_err)?;
    let listed = store.waiting(100).await.map_err(store_err)?;
    ensure(listed.len() == 10, || format!("waiting listed {} tasks, not the 10 that wait", listed.len()))?;

    // Two claimers at once, each through the transition function: every ready task goes to one.
    let tools = ["tool".to_owned()];
    let claim_as = |owner: &'static str| {
        let store = Arc::clone(&store);
        let tools = tools.clone();
        async move {
            let claim = move |task: &TaskRecord| {
                let mut next = task.clone();
                let applied = next.apply(NOW, TaskEvent::Claim { owner: owner.into() }).ok()?;
                Some((next, applied.history))
            };
            store.claim(NOW, &tools, 100, &claim).await
        }
    };
    let (one, two) = tokio::join!(claim_as("w1"), claim_as("w2"));
    let (one, two) = (one.map_err(store_err)?, two.map_err(store_err)?);
    let mut ids: Vec<&str> = one.iter().chain(&two).map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    let expected: Vec<String> = (0..8).map(|n| format!("c-10-{n}")).collect();
    ensure(ids == expected, || format!("two claimers took {ids:?}, not each ready task once"))?;
    for task in one.iter().chain(&two) {
        let stored = store.get(&task.id).await.map_err(store_err)?.ok_or("a claimed task is gone")?;
        ensure(same(&stored, task) && stored.attempt == 1 && !stored.is_waiting(), || {
            format!("claimed task {} is stored as {stored:?}", task.id)
        })?;
    }
    let again = claim_as("w3").await.map_err(store_err)?;
    ensure(again.is_empty(), || format!("a second round claimed {again:?}"))?;
    let later = store.claim(NOW + 60_000, &tools, 100, &|task: &TaskRecord| {
        let mut next = task.clone();
        let applied = next.apply(NOW + 60_000, TaskEvent::Claim { owner: "w4".into() }).ok()?;
        Some((next, applied.history))
    });
    let later: Vec<String> = later.await.map_err(store_err)?.iter().map(|t| t.id.clone()).collect();
    ensure(later == ["c-10-later"], || format!("once its backoff ended the claim took {later:?}"))
}

async fn history_goes_with_its_change(store: Arc<dyn TaskStore>) -> Check {
    let task = record("c-11", "alice", "w1", Some(60_000));
    store.insert(&Arc::new(task.clone())).await.map_err(store_err)?;
    let history = |store: Arc<dyn TaskStore>| async move { store.history("c-11").await.map_err(store_err) };
    let mut expected = TaskHistory::created(&task);
    ensure(history(Arc::clone(&store)).await? == expected, || "an insert did not start the history".into())?;

    let (next, entries) =
        changed(&task, NOW + 1, TaskEvent::RequestInput([("k".to_owned(), json!({}))].into_iter().collect()));
    ensure(entries.len() == 2, || format!("an input request made {entries:?}"))?;
    let written = store.update(&next, task.version, &entries).await.map_err(store_err)?;
    ensure(written == UpdateOutcome::Written, || "an update was refused".into())?;
    expected.extend(entries);
    let got = history(Arc::clone(&store)).await?;
    ensure(got == expected, || format!("after an update the history is {got:?}"))?;

    // A refused update (a stale version) writes no entry.
    let (stale, entries) = changed(&task, NOW + 2, TaskEvent::SetStatusMessage("stale".into()));
    let refused = store.update(&stale, task.version, &entries).await.map_err(store_err)?;
    ensure(refused == UpdateOutcome::Conflict, || "a stale update was written".into())?;
    let got = history(Arc::clone(&store)).await?;
    ensure(got == expected, || format!("a refused update changed the history to {got:?}"))?;

    // Many changes: the newest entries are kept, the rest counted.
    let mut current = TaskRecord::clone(&next);
    let changes = HISTORY_LIMIT as u64 + 50;
    for n in 0..changes {
        let (next, entries) = changed(&current, NOW + 10 + n, TaskEvent::SetStatusMessage(format!("step {n}")));
        store.update(&next, current.version, &entries).await.map_err(store_err)?;
        expected.extend(entries);
        current = TaskRecord::clone(&next);
    }
    let got = history(Arc::clone(&store)).await?;
    ensure(got.entries.len() == HISTORY_LIMIT + 1, || {
        format!("{} entries kept, not the creation and the newest {HISTORY_LIMIT}", got.entries.len())
    })?;
    ensure(got == expected, || {
        format!(
            "after {changes} changes: dropped {} (expected {}), newest {:?}",
            got.dropped,
            expected.dropped,
            got.entries.back()
        )
    })?;

    // A terminal task's history ends with its end; a purge takes it with the task.
    let (done, entries) = changed(&current, NOW + 1_000, TaskEvent::Cancel);
    store.update(&done, current.version, &entries).await.map_err(store_err)?;
    let got = history(Arc::clone(&store)).await?;
    ensure(got.entries.back() == entries.last(), || {
        format!("the cancel's entries are missing: {:?}", got.entries.back())
    })?;
    store.purge(NOW + 60_000, 10).await.map_err(store_err)?;
    ensure(store.get("c-11").await.map_err(store_err)?.is_none(), || "the purge left the task".into())?;
    let got = history(Arc::clone(&store)).await?;
    ensure(got == TaskHistory::default(), || format!("the purge left the history {got:?}"))?;
    let unknown = store.history("c-missing").await.map_err(store_err)?;
    ensure(unknown == TaskHistory::default(), || "an unknown task has a history".into())
}

/// Runs every check; returns the failures as `name: what went wrong` (empty when the store
/// keeps the contract).
pub async fn check(under_test: &dyn StoreUnderTest) -> Vec<String> {
    let mut failures = Vec::new();
    let mut note = |name: &str, result: Check| {
        if let Err(why) = result {
            failures.push(format!("{name}: {why}"));
        }
    };
    note("insert_then_get", insert_then_get(under_test.fresh().await).await);
    note("compare_and_set", compare_and_set(under_test.fresh().await).await);
    note("terminal_rows_are_frozen", terminal_rows_are_frozen(under_test.fresh().await).await);
    note("unfinished_lists_live_tasks", unfinished_lists_live_tasks(under_test.fresh().await).await);
    note("expiry_and_purge", expiry_and_purge(under_test.fresh().await).await);
    note("insert_within_caps", insert_within_caps(under_test.fresh().await).await);
    note(
        "operator_purge_takes_terminal_tasks_only",
        operator_purge_takes_terminal_tasks_only(under_test.fresh().await).await,
    );
    note(
        "purging_named_tasks_takes_terminal_ones_only",
        purging_named_tasks_takes_terminal_ones_only(under_test.fresh().await).await,
    );
    note("claims_take_each_waiting_task_once", claims_take_each_waiting_task_once(under_test.fresh().await).await);
    note("history_goes_with_its_change", history_goes_with_its_change(under_test.fresh().await).await);

    let store = under_test.fresh().await;
    let first = record("c-7", "alice", "w1", None);
    let written = async {
        store.insert(&Arc::new(first.clone())).await?;
        let (next, entries) = changed(&first, NOW + 1, TaskEvent::SetStatusMessage("before the restart".into()));
        store.update(&next, first.version, &entries).await.map(|_| TaskRecord::clone(&next))
    }
    .await;
    let shared = store.shared();
    match written {
        Err(e) => note("durable_across_handles", Err(store_err(e))),
        Ok(latest) => {
            if let Some(again) = under_test.again(Arc::clone(&store)).await {
                note("durable_across_handles", durable_across_handles(&again, &latest).await);
                if shared {
                    note("change_feed", change_feed(&store, &again).await);
                    note("leases", leases(&again).await);
                }
            } else if shared {
                note("change_feed", Err("a shared store must give another handle (again)".into()));
            }
        }
    }
    failures
}

/// Runs [`check`] and panics with every failure.
pub async fn assert_contract(under_test: &dyn StoreUnderTest) {
    let failures = check(under_test).await;
    assert!(failures.is_empty(), "the store breaks the TaskStore contract:\n{}", failures.join("\n"));
}
