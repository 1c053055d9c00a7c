//! The embedded default store: one SQLite file in WAL mode.
//!
//! All SQLite writes go through one writer thread that commits them in groups: it takes the
//! first pending write, drains every other write already queued (up to [`MAX_GROUP`]) and runs
//! them in one transaction. Reads use a small pool of read-only connections and never wait for
//! the writer (WAL). How a caller's write becomes durable depends on [`Durability`]:
//!
//! - `Full`: the caller waits for the group commit and its fsync. Under concurrency one fsync
//!   covers hundreds of writes; a lone caller waits one fsync (~0.7 ms on this project's
//!   virtual disk).
//! - `Normal` (the default): the caller appends the write to a redo log next to the database
//!   (`<file>-redo`, one `pwrite` of a length-prefixed, checksummed record) and returns; the writer thread
//!   commits it to SQLite in the background, on another core. A write that returned is in the
//!   OS page cache, so it survives the process dying at any point (a restart replays the log
//!   into SQLite), exactly as SQLite's own `synchronous=NORMAL` does. On power loss it keeps
//!   what the last sync covered: the writer makes its commits durable (an `fdatasync` of the
//!   WAL) at least every [`SYNC_EVERY`] while writes keep coming and when they pause, so the
//!   writes lost are the last second's at most (`tests/reliability/powerloss.py` measures it). Until the writer commits a write, reads through this store see it from memory (the
//!   pending records), so callers never see the log lag. Measured: a logged write costs ~3 µs
//!   (2 of them the `pwrite`) instead of the ~40 µs of an SQLite commit on the caller's thread.
//!
//! Terminal records are immutable in the database itself: a trigger aborts any UPDATE of a
//! terminal row, whatever process issues it.
//!
//! Read snapshots are reused: a reader keeps its read transaction open for as long as no commit
//! has happened since it began, because a WAL reader pays two `fcntl` lock round trips per
//! transaction (a fifth of a cold read's time, and contended between threads). The writer bumps
//! a commit generation after every commit and *before* answering the writers, so a read that
//! starts after a write was acknowledged always sees it; and after each commit the writer ends
//! idle readers' (now stale) snapshots so they do not hold back WAL checkpoints.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::{Condvar, Mutex};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::{
    AdminAction, AdminOutcome, AdminRequest, StoreError, TaskStore, UpdateOutcome, backend, decode, encode, int,
};
use crate::protocol::history::{HISTORY_LIMIT, may_exceed_limit};
use crate::protocol::{HistoryEntry, TaskHistory, TaskRecord};

/// The most writes committed in one transaction.
pub(crate) const MAX_GROUP: usize = 2048;
const READERS: usize = 4;
/// Past this many bytes of redo log (~7,000 records), writers wait until the writer thread has
/// committed all of it and rewound the log. It rewinds once it has caught up and synced the WAL
/// (at once past [`REWIND_AT`]), so the bound only bites when writes arrive faster than SQLite
/// commits them: it then paces writers to
/// SQLite's rate and caps the memory the pending records take (with a 64 MiB bound, 16
/// writers flat out held ~400 B per task of pending copies at their peak).
const REDO_LIMIT: u64 = 4 << 20;
/// While logged writes keep arriving, the writer thread looks for them this often instead of
/// being woken for each: waking a sleeping thread costs the writer's caller an inter-processor
/// interrupt, measured here (a VM) at ~30 µs, several times the rest of a logged write. Each
/// look commits what came in one transaction, whose fixed cost (BEGIN, the WAL frames of every
/// page touched, COMMIT) was most of the writer thread's time at 1 ms; at 5 ms a group holds
/// five times the writes, and a quick task's create and finish more often fold into one row
/// write. Nothing waits on it: a logged write is readable from memory and in the log already.
const POLL: Duration = Duration::from_millis(5);
/// After this long without writes the writer thread sleeps until woken.
const IDLE: Duration = Duration::from_millis(50);
// The idle step runs when the idle time reaches IDLE exactly, in steps of POLL.
const _: () = assert!(IDLE.as_millis().is_multiple_of(POLL.as_millis()));
/// A writer wakes the writer thread anyway once this many writes wait.
const WAKE_AT: usize = 512;
/// With [`Durability::Normal`], the longest the writer thread lets its commits go without a
/// sync while writes keep coming: the most a power loss takes. SQLite's `synchronous=NORMAL`
/// syncs the WAL only at a checkpoint, which a steady stream of writes (no pause for the idle
/// one, fewer than 4,096 pages) put off indefinitely: power-loss trials lost every write of a
/// 2.5 s burst. One `fdatasync` a second costs the writer thread well under a millisecond of it.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// How a [`SqliteStore`] is opened (`sqlite://` URL options: `durability=full|normal`,
/// `history=on|off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How hard a write works to survive failures.
    pub durability: Durability,
    /// Keep each task's history (the default). Off, nothing is written to it: the admin CLI's
    /// `show` lists no history. For a host that wants every create as cheap as it can be
    /// (docs/BENCHMARKS.md measures what the history costs).
    pub history: bool,
    /// Keep the indexes the web view's list reads (the default): its pages and counts then
    /// read an index range instead of every row. Off, they are dropped (each costs every write
    /// an index entry; docs/BENCHMARKS.md measures what), and the list scans.
    pub view_indexes: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self { durability: Durability::default(), history: true, view_indexes: true }
    }
}

/// The web view's indexes (`mcp_tasks::admin::query`): newest change first overall, within a
/// status, within a principal. The last change is in the record's JSON only, so they index the
/// same expression the queries order by (SQLite uses an expression index only for the same
/// text).
const VIEW_INDEXES: &str = r"
CREATE INDEX IF NOT EXISTS tasks_by_change ON tasks(json_extract(CAST(body AS TEXT), '$.updated_at_ms'), id);
CREATE INDEX IF NOT EXISTS tasks_by_status_change
    ON tasks(status, json_extract(CAST(body AS TEXT), '$.updated_at_ms'), id);
CREATE INDEX IF NOT EXISTS tasks_by_principal_change
    ON tasks(principal, json_extract(CAST(body AS TEXT), '$.updated_at_ms'), id);
";

const NO_VIEW_INDEXES: &str = r"
DROP INDEX IF EXISTS tasks_by_change;
DROP INDEX IF EXISTS tasks_by_status_change;
DROP INDEX IF EXISTS tasks_by_principal_change;
";

/// How hard a write works to survive failures before it returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Every write waits for a group commit with `synchronous=FULL` (an fsync); survives power
    /// loss.
    Full,
    /// Every write is appended to the redo log before it returns and committed to SQLite
    /// (`synchronous=NORMAL`) in the background; survives a process crash (kill -9) at any
    /// point but may lose the last writes on power loss. The default: the same guarantee as
    /// SQLite's WAL default, without a commit on the caller's thread.
    #[default]
    Normal,
}

// A task's history is in its own row: `history` holds its entries after the creation, a JSON
// array per write (a logged update's as the redo log holds them, so the writer thread does not
// serialize them again), appended by the statement that writes the record (so both are written
// or neither, replay included, and a purge takes it with the task); `history_dropped` counts the
// oldest entries dropped to keep the newest HISTORY_LIMIT. The creation's entry is not stored:
// the record holds its facts (`TaskHistory::from_record`). The column follows `body`, so reading
// a record never reads it. `history-cost` measured each of these (docs/BENCHMARKS.md).
// A rowid table with a unique index on the id, not a WITHOUT ROWID table keyed by it: ids are
// random, and keeping ~400-byte rows in a random-key B-tree made every insert split and re-read
// pages (measured: the writer spent most of its time in kernel page copies). Rows now append
// in rowid order and only the small index entry lands at a random place.
const SCHEMA: &str = r"
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    principal TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    expires_at INTEGER,
    version INTEGER NOT NULL,
    body BLOB NOT NULL,
    history TEXT,
    history_dropped INTEGER
);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks(owner) WHERE status IN ('working', 'input_required');
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks(expires_at) WHERE expires_at IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS tasks_terminal_immutable_record
    BEFORE UPDATE OF id, principal, owner, status, expires_at, version, body ON tasks
    WHEN OLD.status IN ('completed', 'failed', 'cancelled')
    BEGIN SELECT RAISE(ABORT, 'terminal tasks never change'); END;
CREATE TABLE IF NOT EXISTS admin_requests (
    seq INTEGER PRIMARY KEY,
    request TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    done_at INTEGER,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS admin_requests_pending ON admin_requests(seq) WHERE done_at IS NULL;
PRAGMA user_version = 3;
";

enum Write {
    Insert(Arc<TaskRecord>),
    Update(Arc<TaskRecord>, u64),
    Purge(u64, usize),
    /// An operator's purge: `(now_ms, updated_before_ms, limit)`.
    PurgeFinished(u64, u64, usize),
    /// Deletes those of these tasks that are terminal.
    PurgeTasks(Vec<String>),
    /// Reads up to this many pending operator requests (on the writer's connection, which sees
    /// what another process wrote; a reader's snapshot may predate it).
    AdminTake(usize),
    /// Records an operator request's outcome (JSON).
    AdminDone(u64, String),
    /// Writes nothing: answered once every write queued before it is committed.
    Flush,
}

enum Written {
    Done,
    Update(UpdateOutcome),
    Purged(usize),
    Admin(Vec<AdminRequest>),
}

/// A read connection and the commit generation its open read transaction (if any) saw.
struct Reader {
    conn: Connection,
    snapshot: Option<u64>,
}

impl Reader {
    /// Ends the open read transaction, if any.
    fn end_snapshot(&mut self) {
        if self.snapshot.take().is_some() {
            // Ending a read-only transaction cannot fail in a way that leaves it open; if it did,
            // the next BEGIN fails and the read reports the error.
            let _ = self.conn.execute_batch("COMMIT");
        }
    }
}

/// The read connections and the commit generation they compare against.
struct Readers {
    slots: Vec<Mutex<Reader>>,
    generation: AtomicU64,
}

impl Readers {
    /// After a commit: bump the generation, then end every idle reader's stale snapshot.
    fn committed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
        for slot in &self.slots {
            if let Some(mut reader) = slot.try_lock() {
                reader.end_snapshot();
            }
        }
    }
}

impl Write {
    /// The record an insert or update writes.
    fn record(&self) -> Option<&Arc<TaskRecord>> {
        match self {
            Self::Insert(task) | Self::Update(task, _) => Some(task),
            Self::Purge(..)
            | Self::PurgeFinished(..)
            | Self::PurgeTasks(_)
            | Self::AdminTake(_)
            | Self::AdminDone(..)
            | Self::Flush => None,
        }
    }
}

/// A write for the writer thread: either a caller waits for its commit (`reply`), or it is
/// already in the redo log under sequence number `logged` and nobody waits.
struct Job {
    write: Write,
    /// An update's history entries, written with its record (an insert's is its record's
    /// creation).
    history: Vec<HistoryEntry>,
    reply: Option<oneshot::Sender<Result<Written, StoreError>>>,
    logged: Option<u64>,
    /// A logged write's record as the log holds it: the same JSON the row stores, so the writer
    /// thread does not serialize the record a second time.
    body: Option<Vec<u8>>,
    /// A logged update's history entries as the log holds them (a JSON array), the line the
    /// row's history appends, for the same reason.
    history_json: Option<Vec<u8>>,
}

/// The writer thread's queue.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: Vec<Job>,
    closed: bool,
    /// The writer thread waits without a timeout: the next write must wake it.
    sleeping: bool,
}

impl Queue {
    /// Queues a job. A job someone waits for wakes the writer thread at once; a logged one only
    /// if the thread sleeps or many wait (otherwise its next poll takes it).
    fn push(&self, job: Job) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(StoreError::Closed);
        }
        let urgent = job.reply.is_some();
        state.jobs.push(job);
        if urgent || state.sleeping || state.jobs.len() >= WAKE_AT {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Moves the next jobs (up to [`MAX_GROUP`]) into `group`; false once closed and drained.
    /// When writes pause for [`IDLE`], runs `on_idle` once (without the queue lock) before
    /// sleeping.
    fn next_group(&self, group: &mut Vec<Job>, on_idle: &mut dyn FnMut()) -> bool {
        let mut state = self.state.lock();
        let mut idle = Duration::ZERO;
        while state.jobs.is_empty() {
            if state.closed {
                return false;
            }
            if idle == IDLE {
                idle += POLL;
                parking_lot::MutexGuard::unlocked(&mut state, &mut *on_idle);
                continue;
            }
            if idle >= IDLE {
                state.sleeping = true;
                self.wake.wait(&mut state);
                state.sleeping = false;
                idle = Duration::ZERO;
            } else {
                self.wake.wait_for(&mut state, POLL);
                idle += POLL;
            }
        }
        let take = state.jobs.len().min(MAX_GROUP);
        group.extend(state.jobs.drain(..take));
        true
    }

    fn close(&self) {
        self.state.lock().closed = true;
        self.wake.notify_one();
    }
}

/// The redo log of [`Durability::Normal`] and the writes in it that SQLite does not hold yet.
struct Redo {
    state: Mutex<RedoState>,
    /// Signalled when the log is emptied or the store closes (writers past [`REDO_LIMIT`]).
    emptied: Condvar,
}

struct RedoState {
    file: File,
    /// Bytes of the current epoch's records, from the start of the file. Older epochs' records
    /// may follow them (the file is rewound, not truncated, which costs a filesystem
    /// transaction per catch-up); replay stops at the first record of another epoch.
    len: u64,
    /// Stamped on every record; moves on at every rewind.
    epoch: u64,
    /// The buffer records are built in, reused.
    frame: Vec<u8>,
    /// Sequence number of the last write appended, and of the last one committed to SQLite.
    appended: u64,
    committed: u64,
    /// The newest logged record of each task SQLite does not hold yet, with its sequence number.
    pending: HashMap<String, (u64, Arc<TaskRecord>)>,
    /// The version of every unfinished task written through this store since it opened
    /// (logged, committed or not). One process owns the file, so these are the stored versions,
    /// and an update of such a task is checked without reading SQLite.
    unfinished: HashMap<String, Unfinished>,
    /// The greatest id stored (at open, then every insert): an id above it cannot be a
    /// duplicate, so an insert of one is checked without reading SQLite. Engine ids start with
    /// a per-process increasing time prefix, so almost every insert takes this path.
    max_id: Option<String>,
}

// Kinds 1 and 2 were the records of the format without a checksum (before 0.1.0 shipped); a
// log of that format reads as empty rather than being trusted unchecked.
const REDO_INSERT: u8 = 3;
const REDO_UPDATE: u8 = 4;
/// Ids a purge deletes, logged before the delete commits: without it, a crash could replay an
/// earlier insert of a purged task from the log and bring the task back.
const REDO_DELETE: u8 = 5;
/// An update with history entries: `record_len: u32 LE | record JSON | entries JSON`, in one
/// record, so a torn log never keeps the one without the other.
const REDO_UPDATE_HISTORY: u8 = 6;

/// One record of the redo log, as replay reads it.
#[derive(Clone, Debug, PartialEq)]
// Public only through `store::fuzz` (feature `fuzzing`).
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub enum RedoRecord {
    /// A task inserted.
    Insert(TaskRecord),
    /// A task updated (applied only over an older, unfinished stored version), with the history
    /// entries of the change.
    Update(TaskRecord, Vec<HistoryEntry>),
    /// Tasks a purge deleted.
    Delete(Vec<String>),
}
/// What [`RedoState::unfinished`] knows of a task.
struct Unfinished {
    version: u64,
    /// When a purge may delete it (a sweep normally expires it long before).
    expires_at: Option<i64>,
}

/// Bytes of a redo record before its JSON: length, checksum, epoch, kind.
const REDO_HEADER: usize = 4 + 4 + 8 + 1;

/// Writes one redo record into `frame` (cleared first): `len: u32 LE | crc: u32 LE | epoch:
/// u64 LE | kind: u8 | record JSON`, where `len` counts everything after itself and `crc` is
/// the CRC-32 of everything but itself (`len` included). The checksum is what lets replay tell
/// a record apart from a torn or damaged one: a cut or flipped byte that still parses as JSON
/// (a digit of a version, a letter of a message) would otherwise be replayed as a write nobody
/// made. Replay needs no expected version: it applies an update only over an older, unfinished
/// stored version.
fn redo_frame(frame: &mut Vec<u8>, epoch: u64, kind: u8, payload: &impl serde::Serialize) -> Result<(), StoreError> {
    frame.clear();
    frame.extend_from_slice(&[0; 8]);
    frame.extend_from_slice(&epoch.to_le_bytes());
    frame.push(kind);
    serde_json::to_writer(&mut *frame, payload).map_err(backend)?;
    let len = u32::try_from(frame.len() - 4).map_err(|_| StoreError::Backend("task record over 4 GiB".into()))?;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    let crc = redo_checksum(frame);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// [`redo_frame`] for an update with history entries ([`REDO_UPDATE_HISTORY`]); returns the
/// range of the record's JSON in the frame.
fn redo_frame_update(
    frame: &mut Vec<u8>,
    epoch: u64,
    task: &TaskRecord,
    history: &[HistoryEntry],
) -> Result<std::ops::Range<usize>, StoreError> {
    frame.clear();
    frame.extend_from_slice(&[0; 8]);
    frame.extend_from_slice(&epoch.to_le_bytes());
    frame.push(REDO_UPDATE_HISTORY);
    frame.extend_from_slice(&[0; 4]);
    let start = frame.len();
    serde_json::to_writer(&mut *frame, task).map_err(backend)?;
    let end = frame.len();
    let record_len = u32::try_from(end - start).map_err(|_| StoreError::Backend("task record over 4 GiB".into()))?;
    frame[REDO_HEADER..start].copy_from_slice(&record_len.to_le_bytes());
    serde_json::to_writer(&mut *frame, history).map_err(backend)?;
    let len = u32::try_from(frame.len() - 4).map_err(|_| StoreError::Backend("task record over 4 GiB".into()))?;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    let crc = redo_checksum(frame);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(start..end)
}

/// Reads the payload of a [`REDO_UPDATE_HISTORY`] record.
fn read_update_history(payload: &[u8]) -> Option<RedoRecord> {
    let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let record = payload.get(4..4 + len)?;
    let task = serde_json::from_slice(record).ok()?;
    let history = serde_json::from_slice(&payload[4 + len..]).ok()?;
    Some(RedoRecord::Update(task, history))
}

/// The checksum of a whole frame, its own four bytes left out.
fn redo_checksum(frame: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&frame[..4]);
    hasher.update(&frame[8..]);
    hasher.finalize()
}

impl RedoState {
    /// An empty log in its first epoch, writing to `file`; `max_id` is the greatest id stored.
    fn new(file: File, max_id: Option<String>) -> Self {
        Self {
            file,
            len: 0,
            epoch: 1,
            frame: Vec::new(),
            appended: 0,
            committed: 0,
            pending: HashMap::new(),
            unfinished: HashMap::new(),
            max_id,
        }
    }

    /// Appends one record and returns its JSON (what a row stores). A failed append does not
    /// move the end of the log, so the next record overwrites whatever part of it landed: the
    /// log never holds a torn record before good ones.
    fn append(&mut self, kind: u8, payload: &impl serde::Serialize) -> Result<Vec<u8>, StoreError> {
        let mut frame = std::mem::take(&mut self.frame);
        let framed = redo_frame(&mut frame, self.epoch, kind, payload).map(|()| REDO_HEADER..frame.len());
        self.write_frame(frame, framed)
    }

    /// Appends an update with its history entries in one record; returns the record's JSON.
    /// Returns the record's JSON and the entries' (a JSON array).
    fn append_update(&mut self, task: &TaskRecord, history: &[HistoryEntry]) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
        let mut frame = std::mem::take(&mut self.frame);
        let framed = redo_frame_update(&mut frame, self.epoch, task, history);
        let entries = framed.as_ref().map(|record| frame[record.end..].to_vec()).unwrap_or_default();
        self.write_frame(frame, framed).map(|record| (record, entries))
    }

    /// Writes a framed record at the end of the log; returns the bytes of `json` in it.
    fn write_frame(
        &mut self,
        frame: Vec<u8>,
        json: Result<std::ops::Range<usize>, StoreError>,
    ) -> Result<Vec<u8>, StoreError> {
        let json = match json {
            Ok(range) => frame[range].to_vec(),
            Err(e) => {
                self.frame = frame;
                return Err(e);
            }
        };
        let written = write_at(&self.file, &frame, self.len);
        let len = frame.len() as u64;
        // Kept for the next record, unless a huge one made it large.
        if frame.capacity() <= 1 << 20 {
            self.frame = frame;
        }
        written.map_err(backend)?;
        self.len += len;
        Ok(json)
    }

    /// After a commit: drops the pending records it covered. The log is rewound apart, once a
    /// sync made the commits durable ([`rewind_redo`]).
    fn committed(&mut self, group: &[Job]) {
        for job in group {
            if let (Some(seq), Some(task)) = (job.logged, job.write.record()) {
                self.committed = self.committed.max(seq);
                if self.pending.get(&task.id).is_some_and(|(newest, _)| *newest == seq) {
                    self.pending.remove(&task.id);
                }
            }
        }
        // A burst can grow the maps far beyond what stays in them; give the memory back.
        if self.pending.capacity() > 4 * self.pending.len() + 1024 {
            self.pending.shrink_to(2 * self.pending.len());
        }
        if self.unfinished.capacity() > 4 * self.unfinished.len() + 1024 {
            self.unfinished.shrink_to(2 * self.unfinished.len());
        }
    }
}

/// Writes all of `buf` at `offset` (one `pwrite` on unix; no seek, no append-mode size update).
fn write_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < buf.len() {
            match std::os::windows::fs::FileExt::seek_write(file, &buf[done..], offset + done as u64)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => done += n,
            }
        }
        Ok(())
    }
}

/// Reads the records of a redo log's current epoch (the first record's): a record of another
/// epoch (left from before a rewind), or a torn, damaged or unreadable one (a write cut short by
/// a power loss, a flipped bit), ends it. So what it returns is always a prefix of the records
/// appended since the last rewind, each exactly as written.
fn read_redo(bytes: &[u8]) -> Vec<RedoRecord> {
    let mut records = Vec::new();
    let mut rest = bytes;
    let mut current = None;
    while rest.len() >= REDO_HEADER {
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if len < REDO_HEADER - 4 || rest.len() - 4 < len {
            break;
        }
        let frame = &rest[..4 + len];
        if u32::from_le_bytes(frame[4..8].try_into().expect("4 bytes")) != redo_checksum(frame) {
            break;
        }
        let epoch = u64::from_le_bytes(frame[8..16].try_into().expect("8 bytes"));
        if *current.get_or_insert(epoch) != epoch {
            break;
        }
        let payload = &frame[REDO_HEADER..];
        let record = match frame[16] {
            REDO_INSERT => serde_json::from_slice(payload).ok().map(RedoRecord::Insert),
            REDO_UPDATE => serde_json::from_slice(payload).ok().map(|task| RedoRecord::Update(task, Vec::new())),
            REDO_DELETE => serde_json::from_slice(payload).ok().map(RedoRecord::Delete),
            REDO_UPDATE_HISTORY => read_update_history(payload),
            _ => None,
        };
        match record {
            Some(record) => records.push(record),
            None => break,
        }
        rest = &rest[4 + len..];
    }
    if !rest.is_empty() {
        tracing::warn!(
            records = records.len(),
            ignored_bytes = rest.len(),
            "the redo log ends in a torn or damaged record; replaying the records before it"
        );
    }
    records
}

/// Applies a redo log left by a process that died to SQLite, in one transaction. Records SQLite
/// already holds (committed before the death) change nothing: inserts are `OR IGNORE` and
/// updates apply only over an older, unfinished version.
fn replay_redo(conn: &mut Connection, records: &[RedoRecord]) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(backend)?;
    for record in records {
        let task = match record {
            RedoRecord::Insert(task) | RedoRecord::Update(task, _) => task,
            RedoRecord::Delete(ids) => {
                for id in ids {
                    delete_task(&tx, id)?;
                }
                continue;
            }
        };
        let (status, expires, version, body) =
            (task.status.as_str(), expires_at(task), i64::try_from(task.version).unwrap_or(i64::MAX), encode(task));
        // The history goes with the row's own statement: a write SQLite already held came with
        // its entries, and one it did not gets them now.
        let changed = match record {
            RedoRecord::Insert(task) => tx.execute(
                "INSERT OR IGNORE INTO tasks (id, principal, owner, status, expires_at, version, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![task.id, task.principal, task.owner, status, expires, version, body],
            ),
            RedoRecord::Update(task, history) => tx.execute(
                "UPDATE tasks SET status = ?2, expires_at = ?3, version = ?4, body = ?5, owner = ?6, \
                 history = coalesce(history, '') || ?7 \
                 WHERE id = ?1 AND version < ?4 AND status IN ('working', 'input_required')",
                params![task.id, status, expires, version, body, task.owner, history_lines(history)],
            ),
            RedoRecord::Delete(_) => unreachable!("deletes are applied above"),
        }
        .map_err(backend)?;
        if changed == 1 {
            trim_history(&tx, task)?;
        }
    }
    tx.commit().map_err(backend)
}

/// Entry points for the fuzz targets in `core/fuzz` (feature `fuzzing`): the redo log's framing
/// and replay, and the decoding of stored rows, without files or threads. Not a stable API.
#[cfg(feature = "fuzzing")]
pub mod fuzz {
    use std::sync::Arc;

    use rusqlite::Connection;

    pub use super::RedoRecord;
    use super::{REDO_DELETE, REDO_INSERT, REDO_UPDATE, SCHEMA, StoreError, TaskRecord, Write, backend, decode};
    use crate::protocol::HistoryEntry;

    /// One redo record as [`super::SqliteStore`] appends it.
    pub fn redo_frame(epoch: u64, record: &RedoRecord) -> Vec<u8> {
        let mut frame = Vec::new();
        match record {
            RedoRecord::Insert(task) => super::redo_frame(&mut frame, epoch, REDO_INSERT, task),
            RedoRecord::Update(task, history) if history.is_empty() => {
                super::redo_frame(&mut frame, epoch, REDO_UPDATE, task)
            }
            RedoRecord::Update(task, history) => super::redo_frame_update(&mut frame, epoch, task, history).map(|_| ()),
            RedoRecord::Delete(ids) => super::redo_frame(&mut frame, epoch, REDO_DELETE, ids),
        }
        .expect("a record serializes");
        frame
    }

    /// The records replay would apply from `log`.
    pub fn read_redo(log: &[u8]) -> Vec<RedoRecord> {
        super::read_redo(log)
    }

    /// Replays `log` as opening a store does, over a fresh in-memory database already holding
    /// `stored` (committed before the crash), and returns every row after it, by id.
    pub fn replay(stored: &[TaskRecord], log: &[u8]) -> Result<Vec<TaskRecord>, StoreError> {
        let mut conn = Connection::open_in_memory().map_err(backend)?;
        conn.execute_batch(SCHEMA).map_err(backend)?;
        // Through the writer's own insert, as SQLite got them before the crash.
        let tx = conn.transaction().map_err(backend)?;
        for task in stored {
            super::apply(&tx, &Write::Insert(Arc::new(task.clone())), None, None, "")?;
        }
        tx.commit().map_err(backend)?;
        super::replay_redo(&mut conn, &super::read_redo(log))?;
        let mut statement = conn.prepare("SELECT id, body FROM tasks ORDER BY id").map_err(backend)?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)))
            .map_err(backend)?;
        rows.map(|row| {
            let (id, body) = row.map_err(backend)?;
            decode(&id, &body)
        })
        .collect()
    }

    /// Replays `log` as [`replay`] does, over tasks stored with the histories they had, and
    /// returns every task's history after it, by id.
    pub fn replay_history(
        stored: &[(TaskRecord, Vec<HistoryEntry>)],
        log: &[u8],
    ) -> Result<Vec<(String, Vec<HistoryEntry>)>, StoreError> {
        let mut conn = Connection::open_in_memory().map_err(backend)?;
        conn.execute_batch(SCHEMA).map_err(backend)?;
        let tx = conn.transaction().map_err(backend)?;
        for (task, history) in stored {
            // The creation is the record itself; the column holds what came after.
            let lines = super::history_lines(history.get(1..).unwrap_or_default());
            super::apply(&tx, &Write::Insert(Arc::new(task.clone())), None, None, &lines)?;
        }
        tx.commit().map_err(backend)?;
        super::replay_redo(&mut conn, &super::read_redo(log))?;
        let ids: Vec<String> = conn
            .prepare("SELECT id FROM tasks ORDER BY id")
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .map_err(backend)?;
        ids.into_iter()
            .map(|id| {
                let history = super::read_history(&conn, &id).map_err(backend)?;
                Ok((id, history.entries.into()))
            })
            .collect()
    }

    /// Decodes a stored row's body as every read does.
    pub fn decode_row(id: &str, body: &[u8]) -> Result<TaskRecord, StoreError> {
        decode(id, body)
    }
}

/// Tasks in one SQLite file (WAL). One host process may open a file at a time (it holds a lock
/// on `<file>.lock`, which names its process id); a second open fails with
/// [`StoreError::Locked`].
pub struct SqliteStore {
    path: PathBuf,
    /// The writer thread's queue.
    queue: Arc<Queue>,
    /// [`Durability::Normal`]'s redo log.
    redo: Option<Arc<Redo>>,
    /// False when the store keeps no history ([`SqliteOptions::history`]).
    history: bool,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Arc<Readers>,
    next_reader: AtomicUsize,
    lock: Mutex<Option<File>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Wall-clock time for the operator requests' bookkeeping columns.
fn now_ms() -> i64 {
    int(crate::clock::Clock::now_ms(&crate::clock::SystemClock))
}

/// Deletes `ids` (a purge), logging them first when there is a redo log.
fn delete_ids(tx: &rusqlite::Transaction<'_>, ids: &[String], redo: Option<&Redo>) -> Result<Written, StoreError> {
    if ids.is_empty() {
        return Ok(Written::Purged(0));
    }
    // Logged before the delete commits: the log may still hold these tasks' inserts (its
    // records are kept until every logged write is committed, and a rewound log keeps its
    // bytes), which a replay after a crash would otherwise bring back.
    if let Some(redo) = redo {
        redo.state.lock().append(REDO_DELETE, &ids)?;
    }
    let mut deleted = 0;
    for id in ids {
        deleted += delete_task(tx, id)?;
    }
    Ok(Written::Purged(deleted))
}

/// Deletes one task (its history is in its row); returns how many tasks went (0 or 1).
fn delete_task(tx: &rusqlite::Transaction<'_>, id: &str) -> Result<usize, StoreError> {
    tx.prepare_cached("DELETE FROM tasks WHERE id = ?1").and_then(|mut s| s.execute([id])).map_err(backend)
}

/// Gives a file made before histories (schema version 2) the history columns, and drops its
/// trigger that froze a terminal row whole (the schema's trigger freezes the record's columns:
/// a terminal task's history is trimmed after its last change).
fn add_history_columns(conn: &Connection) -> Result<(), StoreError> {
    if !has_history_columns(conn).map_err(backend)? {
        conn.execute_batch(
            "BEGIN; ALTER TABLE tasks ADD COLUMN history TEXT; ALTER TABLE tasks ADD COLUMN history_dropped INTEGER; COMMIT;",
        )
        .map_err(backend)?;
    }
    conn.execute_batch("DROP TRIGGER IF EXISTS tasks_terminal_immutable").map_err(backend)
}

/// True when the `tasks` table has the history columns.
fn has_history_columns(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("SELECT count(*) > 0 FROM pragma_table_info('tasks') WHERE name = 'history'", [], |row| row.get(0))
}

/// `entries` (one write's) as the line the `history` column appends: a JSON array and a newline
/// (none for no entries).
fn history_lines(entries: &[HistoryEntry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut line = serde_json::to_string(entries).expect("history entries serialize");
    line.push('\n');
    line
}

/// The line a committed job appends to its task's history: the log's bytes of its entries when
/// it was logged, else its entries serialized.
fn job_line(job: &Job, lines: &mut String) {
    match &job.history_json {
        Some(json) => {
            lines.push_str(std::str::from_utf8(json).expect("serde_json writes UTF-8"));
            lines.push('\n');
        }
        None => lines.push_str(&history_lines(&job.history)),
    }
}

/// The entries of a `history` column (a JSON array per line), oldest first; an entry this
/// version cannot read (a newer library's, or a damaged one) is left out.
fn history_entries(lines: &str) -> impl Iterator<Item = HistoryEntry> + '_ {
    lines.lines().flat_map(|line| {
        serde_json::from_str::<Vec<serde_json::Value>>(line)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|entry| serde_json::from_value(entry).ok())
    })
}

/// For a task old enough to have more than [`HISTORY_LIMIT`] entries: drops (and counts) the
/// oldest beyond them.
fn trim_history(tx: &rusqlite::Transaction<'_>, task: &TaskRecord) -> Result<(), StoreError> {
    if !may_exceed_limit(task.version) {
        return Ok(());
    }
    let history: Option<String> = tx
        .prepare_cached("SELECT history FROM tasks WHERE id = ?1")
        .and_then(|mut s| s.query_row([&task.id], |row| row.get(0)).optional())
        .map_err(backend)?
        .flatten();
    let Some(history) = history else { return Ok(()) };
    let mut entries: Vec<HistoryEntry> = history_entries(&history).collect();
    if entries.len() <= HISTORY_LIMIT {
        return Ok(());
    }
    let dropped = entries.len() - HISTORY_LIMIT;
    let kept = history_lines(&entries.split_off(dropped));
    tx.prepare_cached(
        "UPDATE tasks SET history = ?2, history_dropped = coalesce(history_dropped, 0) + ?3 WHERE id = ?1",
    )
    .and_then(|mut s| s.execute(params![task.id, kept, dropped as i64]))
    .map_err(backend)?;
    Ok(())
}

/// Task `id`'s history as the database at `conn` holds it (a task stored before histories, or
/// a file no host of this version opened, has none).
pub(crate) fn read_history(conn: &Connection, id: &str) -> rusqlite::Result<TaskHistory> {
    if !has_history_columns(conn)? {
        return Ok(TaskHistory::default());
    }
    let row: Option<(Vec<u8>, Option<String>, Option<i64>)> = conn
        .prepare_cached("SELECT body, history, history_dropped FROM tasks WHERE id = ?1")?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?;
    let Some((body, lines, dropped)) = row else { return Ok(TaskHistory::default()) };
    let Ok(task) = decode(id, &body) else { return Ok(TaskHistory::default()) };
    let later = history_entries(lines.as_deref().unwrap_or(""));
    Ok(TaskHistory::from_record(&task, later, dropped.map_or(0, |d| u64::try_from(d).unwrap_or(0))))
}

fn finish_admin(tx: &rusqlite::Transaction<'_>, seq: u64, outcome: &str) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE admin_requests SET done_at = ?2, outcome = ?3 WHERE seq = ?1")
        .map_err(backend)?
        .execute(params![int(seq), now_ms(), outcome])
        .map_err(backend)?;
    Ok(())
}

/// Queues an operator request in the store at `conn` (another process's connection: the
/// `mcp-tasks` admin CLI) for the host process that owns it; returns its sequence number. The
/// error is SQLite's own, so the caller can tell a busy file from other failures.
pub(crate) fn enqueue_admin(conn: &Connection, action: &AdminAction) -> rusqlite::Result<u64> {
    let request = serde_json::to_string(action).expect("requests serialize");
    conn.execute("INSERT INTO admin_requests (request, requested_at) VALUES (?1, ?2)", params![request, now_ms()])?;
    Ok(u64::try_from(conn.last_insert_rowid()).unwrap_or(0))
}

/// The outcome of queued request `seq`, once its host applied it.
pub(crate) fn admin_outcome(conn: &Connection, seq: u64) -> Result<Option<AdminOutcome>, StoreError> {
    let outcome: Option<String> = conn
        .query_row("SELECT outcome FROM admin_requests WHERE seq = ?1", params![int(seq)], |row| row.get(0))
        .map_err(backend)?;
    outcome
        .map(|text| {
            serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt { id: format!("admin request {seq}"), reason: e.to_string() })
        })
        .transpose()
}

fn expires_at(task: &TaskRecord) -> Option<i64> {
    task.expires_at_ms().map(|ms| i64::try_from(ms).unwrap_or(i64::MAX))
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` with the default durability
    /// ([`Durability::Normal`]), replaying a redo log a dead process left.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::default())
    }

    /// Opens the store at `path` with the given durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        Self::open_with_options(path, SqliteOptions { durability, ..SqliteOptions::default() })
    }

    /// Opens the store at `path` with `options`.
    pub fn open_with_options(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let SqliteOptions { durability, history, view_indexes } = options;
        let path = path.as_ref().to_path_buf();
        let lock_path = {
            let mut p = path.clone().into_os_string();
            p.push(".lock");
            PathBuf::from(p)
        };
        let lock = File::options().create(true).truncate(false).write(true).open(&lock_path).map_err(backend)?;
        // One host process per file: the engine fails every unfinished task at start-up as
        // abandoned, which is only right if no other live process is running them.
        lock.try_lock().map_err(|_| StoreError::Locked(path.display().to_string()))?;
        // Who holds it, for an operator's tools (`mcp-tasks` names the process); advisory only.
        let _ = lock.set_len(0).and_then(|()| (&lock).write_all(std::process::id().to_string().as_bytes()));

        let mut writer_conn = Connection::open(&path).map_err(backend)?;
        writer_conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(backend)?;
        writer_conn.pragma_update(None, "journal_mode", "WAL").map_err(backend)?;
        let sync = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        writer_conn.pragma_update(None, "synchronous", sync).map_err(backend)?;
        // A 2 MiB page cache holds the B-tree tails that group commits touch. A larger one is
        // memory held while tasks are in flight, for no measured gain: 8 MiB made the same
        // `limits --only creates` (36-37k/s) and `durable_create` figures within their noise,
        // and cost ~570 B more per in-flight task in `tests/reliability/load.py rust`; larger
        // still measured slower (SQLite walks the whole cache when a write transaction starts
        // after the WAL changed). A 16 MiB WAL between checkpoints amortizes copying pages back.
        writer_conn.pragma_update(None, "cache_size", -2_048).map_err(backend)?;
        writer_conn.pragma_update(None, "wal_autocheckpoint", 4_096).map_err(backend)?;
        writer_conn.execute_batch(SCHEMA).map_err(backend)?;
        add_history_columns(&writer_conn)?;
        // On a file made before them, the first open builds them (a pass over every row).
        writer_conn.execute_batch(if view_indexes { VIEW_INDEXES } else { NO_VIEW_INDEXES }).map_err(backend)?;

        // A redo log is replayed whatever the durability asked for now: it holds writes that
        // callers were told are stored.
        let redo_path = {
            let mut p = path.clone().into_os_string();
            p.push("-redo");
            PathBuf::from(p)
        };
        let mut redo_file =
            File::options().create(true).truncate(false).read(true).write(true).open(&redo_path).map_err(backend)?;
        let mut leftover = Vec::new();
        redo_file.read_to_end(&mut leftover).map_err(backend)?;
        if !leftover.is_empty() {
            let records = read_redo(&leftover);
            tracing::info!(records = records.len(), log = %redo_path.display(), "replaying the redo log");
            replay_redo(&mut writer_conn, &records)?;
            redo_file.set_len(0).map_err(backend)?;
        }

        let mut readers = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let conn = Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(backend)?;
            conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(backend)?;
            // Reads map the file instead of copying pages through read(2); the mapping is the
            // OS page cache, shared and reclaimable, not memory of this process's own.
            conn.pragma_update(None, "mmap_size", 1_i64 << 30).map_err(backend)?;
            readers.push(Mutex::new(Reader { conn, snapshot: None }));
        }

        let readers = Arc::new(Readers { slots: readers, generation: AtomicU64::new(0) });
        let max_id: Option<String> =
            writer_conn.query_row("SELECT max(id) FROM tasks", [], |row| row.get(0)).map_err(backend)?;
        let redo = (durability == Durability::Normal)
            .then(|| Arc::new(Redo { state: Mutex::new(RedoState::new(redo_file, max_id)), emptied: Condvar::new() }));
        let queue = Arc::new(Queue::default());
        let (thread_queue, thread_readers, thread_redo) = (Arc::clone(&queue), Arc::clone(&readers), redo.clone());
        let mut wal_path = path.clone().into_os_string();
        wal_path.push("-wal");
        let thread = std::thread::Builder::new()
            .name("mcp-tasks-sqlite-writer".into())
            .spawn(move || {
                let sync = thread_redo.is_some().then(|| WalSync::new(&wal_path));
                writer_loop(writer_conn, &thread_queue, &thread_readers, thread_redo.as_deref(), sync, history);
            })
            .map_err(backend)?;
        Ok(Self {
            path,
            queue,
            redo,
            history,
            writer_thread: Mutex::new(Some(thread)),
            readers,
            next_reader: AtomicUsize::new(0),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues a write for the writer thread and waits for its commit.
    async fn write(&self, write: Write) -> Result<Written, StoreError> {
        self.write_with(write, Vec::new()).await
    }

    /// [`SqliteStore::write`] of an update with its history entries.
    async fn write_with(&self, write: Write, history: Vec<HistoryEntry>) -> Result<Written, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.queue.push(Job { write, history, reply: Some(reply), logged: None, body: None, history_json: None })?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Waits until SQLite holds every write made so far (queries that scan the table).
    async fn flush(&self) -> Result<(), StoreError> {
        if self.redo.is_some() {
            self.write(Write::Flush).await?;
        }
        Ok(())
    }

    /// [`Durability::Normal`]'s insert or update: checks it as SQLite would, appends it to the
    /// redo log, makes it visible to reads and queues it for the writer thread.
    fn log_write(&self, redo: &Redo, write: Write, history: Vec<HistoryEntry>) -> Result<Written, StoreError> {
        let mut state = redo.state.lock();
        while state.len > REDO_LIMIT {
            if self.queue.state.lock().closed {
                return Err(StoreError::Closed);
            }
            redo.emptied.wait(&mut state);
        }
        let task = write.record().expect("only inserts and updates are logged");
        // The state lock is held from the check to the append, so no other write to this task
        // comes in between; the writer thread removes pending records only under it too.
        let kind = match &write {
            Write::Insert(_) => {
                let above = state.max_id.as_ref().is_none_or(|max| task.id > *max);
                if !above && (state.pending.contains_key(&task.id) || self.get_committed(&task.id)?.is_some()) {
                    return Err(StoreError::Duplicate(task.id.clone()));
                }
                REDO_INSERT
            }
            Write::Update(_, expected) => {
                let current = match state.unfinished.get(&task.id) {
                    Some(known) => Some((known.version, false)),
                    None => match state.pending.get(&task.id) {
                        Some((_, record)) => Some((record.version, record.status.is_terminal())),
                        None => self.get_committed(&task.id)?.map(|c| (c.version, c.status.is_terminal())),
                    },
                };
                if current != Some((*expected, false)) {
                    return Ok(Written::Update(UpdateOutcome::Conflict));
                }
                REDO_UPDATE
            }
            _ => unreachable!("only inserts and updates are logged"),
        };
        if self.queue.state.lock().closed {
            return Err(StoreError::Closed);
        }
        let (body, history_json) = if history.is_empty() {
            (state.append(kind, task.as_ref())?, None)
        } else {
            let (body, entries) = state.append_update(task, &history)?;
            (body, Some(entries))
        };
        state.appended += 1;
        let seq = state.appended;
        state.pending.insert(task.id.clone(), (seq, Arc::clone(task)));
        if task.status.is_terminal() {
            state.unfinished.remove(&task.id);
        } else {
            let known = Unfinished { version: task.version, expires_at: expires_at(task) };
            state.unfinished.insert(task.id.clone(), known);
        }
        if kind == REDO_INSERT && state.max_id.as_ref().is_none_or(|max| task.id > *max) {
            state.max_id = Some(task.id.clone());
        }
        let written = if kind == REDO_INSERT { Written::Done } else { Written::Update(UpdateOutcome::Written) };
        // The record is in the log: if the writer thread is gone, a restart commits it.
        let _ = self.queue.push(Job { write, history, reply: None, logged: Some(seq), body: Some(body), history_json });
        Ok(written)
    }

    /// Reads a record as SQLite holds it (without the pending ones).
    fn get_committed(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let body: Option<Vec<u8>> = self.read(|conn| {
            conn.prepare_cached("SELECT body FROM tasks WHERE id = ?1")?.query_row([id], |row| row.get(0)).optional()
        })?;
        body.map(|body| decode(id, &body)).transpose()
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let slots = &self.readers.slots;
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        // Take the first free reader, else wait on the round-robin pick.
        let mut reader = (0..slots.len())
            .find_map(|offset| slots[(start + offset) % slots.len()].try_lock())
            .unwrap_or_else(|| slots[start % slots.len()].lock());
        // Load the generation before the snapshot begins: the snapshot then holds at least every
        // commit counted so far, so it may be reused while the generation stays the same.
        let generation = self.readers.generation.load(Ordering::Acquire);
        if reader.snapshot != Some(generation) {
            reader.end_snapshot();
            reader.conn.execute_batch("BEGIN").map_err(backend)?;
            reader.snapshot = Some(generation);
        }
        let result = f(&reader.conn);
        if result.is_err() {
            reader.end_snapshot();
        }
        result.map_err(backend)
    }

    fn read_many(&self, sql: &str, bind: impl rusqlite::Params) -> Result<Vec<TaskRecord>, StoreError> {
        let rows: Vec<(String, Vec<u8>)> = self.read(|conn| {
            let mut stmt = conn.prepare_cached(sql)?;
            stmt.query_map(bind, |row| Ok((row.get(0)?, row.get(1)?)))?.collect()
        })?;
        rows.iter().map(|(id, body)| decode(id, body)).collect()
    }

    /// Stops the writer after it finishes the queued writes and releases the file for another
    /// process; later writes fail with [`StoreError::Closed`].
    pub fn close(&self) {
        self.queue.close();
        if let Some(redo) = &self.redo {
            let _state = redo.state.lock();
            redo.emptied.notify_all();
        }
        if let Some(thread) = self.writer_thread.lock().take() {
            let _ = thread.join();
        }
        if let Some(redo) = &self.redo {
            let state = redo.state.lock();
            // Caught up: nothing in the log is needed, so the next open replays nothing.
            if state.len == 0 {
                let _ = state.file.set_len(0);
            }
        }
        for slot in &self.readers.slots {
            slot.lock().end_snapshot();
        }
        self.lock.lock().take();
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread's syncs of the WAL with [`Durability::Normal`]: every [`SYNC_EVERY`] while
/// commits keep coming, and when they pause if the idle checkpoint (which syncs) gave up.
struct WalSync {
    path: PathBuf,
    /// The WAL, opened at the first sync (SQLite creates it at the first write). A descriptor of
    /// our own is safe: SQLite's POSIX locks are on the database and its `-shm`, which closing
    /// another descriptor of the same file would release, never on the WAL.
    file: Option<File>,
    last: std::time::Instant,
    /// Commits since the last sync.
    dirty: bool,
}

impl WalSync {
    fn new(path: &std::ffi::OsStr) -> Self {
        Self { path: PathBuf::from(path), file: None, last: std::time::Instant::now(), dirty: false }
    }

    /// A group committed: syncs when the last sync is [`SYNC_EVERY`] old.
    fn committed(&mut self) {
        self.dirty = true;
        if self.last.elapsed() >= SYNC_EVERY {
            self.sync();
        }
    }

    /// Makes every commit so far durable (`fdatasync` of the WAL, the same file SQLite writes).
    fn sync(&mut self) {
        if !self.dirty {
            return;
        }
        if self.file.is_none() {
            self.file =
                File::open(&self.path).map_err(|e| tracing::warn!(error = %e, "cannot open the WAL to sync it")).ok();
        }
        if let Some(file) = &self.file {
            match file.sync_data() {
                Ok(()) => self.dirty = false,
                Err(e) => tracing::warn!(error = %e, "syncing the WAL failed; trying again after the next commit"),
            }
        }
        self.last = std::time::Instant::now();
    }

    /// A checkpoint (which syncs the WAL and the database) went through.
    fn checkpointed(&mut self) {
        self.dirty = false;
        self.last = std::time::Instant::now();
    }
}

fn writer_loop(
    mut conn: Connection,
    queue: &Queue,
    readers: &Readers,
    redo: Option<&Redo>,
    mut sync: Option<WalSync>,
    history: bool,
) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    loop {
        let more = queue.next_group(&mut group, &mut || {
            let checkpointed = idle_checkpoint(&conn, readers);
            if let Some(sync) = sync.as_mut() {
                if checkpointed {
                    sync.checkpointed()
                } else {
                    sync.sync()
                }
                if let Some(redo) = redo {
                    rewind_redo(redo, sync, false);
                }
            }
        });
        if !more {
            // Closing with every write committed: made durable, the log is not needed again.
            if let (Some(redo), Some(sync)) = (redo, sync.as_mut()) {
                rewind_redo(redo, sync, true);
            }
            break;
        }
        let results = loop {
            match commit_group(&mut conn, &group, redo, history) {
                Ok(results) => break results,
                // Logged writes were promised to callers: keep trying (they stay readable from
                // memory, and in the log for a restart). Waiting callers get the error.
                Err(e) if group.iter().any(|job| job.logged.is_some()) => {
                    if queue.state.lock().closed {
                        // Closing: leave the logged writes in the log (and the log as it is)
                        // for the next open to replay, rather than hang the close.
                        tracing::error!(error = %e, "SQLite commit failed while closing; the redo log keeps the writes");
                        for job in group.drain(..) {
                            if let Some(reply) = job.reply {
                                let _ = reply.send(Err(StoreError::Backend(e.to_string().into())));
                            }
                        }
                        return;
                    }
                    tracing::error!(error = %e, "SQLite commit failed; retrying the logged writes");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => break group.iter().map(|_| Err(StoreError::Backend(e.to_string().into()))).collect(),
            }
        };
        if let Some(sync) = sync.as_mut() {
            sync.committed();
        }
        // Before anyone learns of these writes, and before their pending records go: later
        // reads must start a fresh snapshot.
        readers.committed();
        if let (Some(redo), Some(sync)) = (redo, sync.as_mut()) {
            redo.state.lock().committed(&group);
            rewind_redo(redo, sync, false);
        }
        for (job, result) in group.drain(..).zip(results) {
            match (job.reply, result) {
                (Some(reply), result) => {
                    let _ = reply.send(result);
                }
                (None, Err(e)) => tracing::error!(error = %e, "a logged write was refused by SQLite"),
                (None, Ok(Written::Update(UpdateOutcome::Conflict))) => {
                    tracing::error!("a logged update found another version in SQLite");
                }
                (None, Ok(_)) => {}
            }
        }
    }
}

/// Past this many bytes of redo log, a writer thread that has committed all of it syncs the WAL
/// at once to rewind the log, rather than wait for the next periodic sync (a burst would
/// otherwise reach [`REDO_LIMIT`] within the second and hold its writers up): one `fdatasync`
/// per ~3,500 records.
const REWIND_AT: u64 = REDO_LIMIT / 2;

/// Rewinds the redo log (a new epoch from offset 0) once SQLite holds every logged write and a
/// sync made those commits durable. Rewound before the sync, the log's next epoch overwrote
/// records whose commits were still only in the OS cache: a disk that keeps some unsynced
/// writes and loses others then kept a later record and lost an earlier commit, a hole
/// (`tests/reliability/powerloss.py --keep some`). The log waits for the periodic sync, or
/// syncs now when it is long or `closing`.
fn rewind_redo(redo: &Redo, sync: &mut WalSync, closing: bool) {
    let long = {
        let state = redo.state.lock();
        if state.len == 0 || state.committed != state.appended {
            return;
        }
        state.len >= REWIND_AT
    };
    if sync.dirty && (long || closing) {
        sync.sync();
    }
    if sync.dirty {
        return; // the next sync rewinds it (or, if the sync failed, the next commit tries again)
    }
    let mut state = redo.state.lock();
    // Writes logged meanwhile are not committed yet: the log keeps them.
    if state.committed == state.appended && state.len > 0 {
        state.len = 0;
        state.epoch += 1;
        drop(state);
        redo.emptied.notify_all();
    }
}

/// When writes pause: ends idle readers' snapshots and moves the WAL into the database file,
/// emptying the WAL. Readers then read from the memory-mapped file instead of looking pages up
/// in the WAL and `pread`ing them: measured, cold reads of 20,000 tasks just written went from
/// ~200,000 to ~260,000 per second (without it, group commits that never filled a WAL cycle
/// left every page there). A reader busy at that moment makes it give up at once (the busy
/// timeout is lifted for it) rather than hold up the writes that follow. True when it went
/// through (and so synced the WAL and the database).
fn idle_checkpoint(conn: &Connection, readers: &Readers) -> bool {
    readers.committed();
    let _ = conn.busy_timeout(Duration::ZERO);
    let done = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get::<_, i64>(0));
    let _ = conn.busy_timeout(Duration::from_secs(5));
    match done {
        Ok(0) => true,
        Ok(_) => {
            tracing::debug!("idle WAL checkpoint: a reader was busy; the WAL stays until the next pause");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "idle WAL checkpoint failed");
            false
        }
    }
}

/// Runs a group in one transaction: the outer error is the transaction's, the inner ones each
/// write's (SQLite undoes only the failed statement, so the rest of the group still commits).
fn commit_group(
    conn: &mut Connection,
    group: &[Job],
    redo: Option<&Redo>,
    history: bool,
) -> Result<Vec<Result<Written, StoreError>>, StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(backend)?;
    let steps = coalesce(group);
    // The superseded writes of a task, whose histories wait for the run's merged write.
    let mut deferred: HashMap<&str, Vec<&Job>> = HashMap::new();
    let results: Vec<Result<Written, StoreError>> = group
        .iter()
        .zip(steps)
        .map(|(job, step)| match step {
            Step::Apply => {
                let mut lines = String::new();
                if history {
                    job_line(job, &mut lines);
                }
                let written = apply(&tx, &job.write, job.body.as_deref(), redo, &lines)?;
                if let (true, Some(task)) = (history, job.write.record()) {
                    trim_history(&tx, task)?;
                }
                Ok(written)
            }
            Step::Superseded => {
                let task = job.write.record().expect("only logged writes are superseded");
                // An insert adds no entry (its record is the creation): a quick task's run
                // defers nothing.
                if history && !job.history.is_empty() {
                    deferred.entry(task.id.as_str()).or_default().push(job);
                }
                Ok(match job.write {
                    Write::Update(..) => Written::Update(UpdateOutcome::Written),
                    _ => Written::Done,
                })
            }
            Step::Merged(merged) => {
                let body = job.body.as_deref();
                let task = job.write.record().expect("only logged writes are merged");
                let earlier = if deferred.is_empty() {
                    Vec::new()
                } else {
                    deferred.remove(task.id.as_str()).unwrap_or_default()
                };
                // The run's entries, appended by its one row write.
                let mut lines = String::new();
                if history {
                    for job in earlier.into_iter().chain([job]) {
                        job_line(job, &mut lines);
                    }
                }
                let written = match apply(&tx, &merged, body, redo, &lines)? {
                    Written::Done => Written::Update(UpdateOutcome::Written),
                    written => written,
                };
                if history {
                    trim_history(&tx, task)?;
                }
                Ok(written)
            }
        })
        .collect();
    tx.commit().map_err(backend)?;
    Ok(results)
}

/// What the writer thread does for one job of a group.
enum Step {
    /// Its own write.
    Apply,
    /// Nothing: a later logged write of the same task in the group holds a newer record.
    Superseded,
    /// This newest logged record of a task, as the first of its writes in the run asked: an
    /// insert (the task is new) or an update expecting the version SQLite holds.
    Merged(Write),
}

/// Folds the logged writes of one task that follow each other in a group (a task created and
/// finished within a commit, the common case of a quick tool) into one write of the newest
/// record: an insert then an update become one insert, updates become one update expecting
/// the stored version. Each was checked against the versions before it was logged, so the rows
/// end the same, with a row written once instead of once per change (measured with
/// `limits --only creates`: the writer thread's share of all CPU went from 21% to 16%, with
/// the row JSON taken from the log as well). A write someone waits
/// for (a purge, an operator's request) ends a run: nothing is moved across it.
fn coalesce(group: &[Job]) -> Vec<Step> {
    let mut steps: Vec<Step> = group.iter().map(|_| Step::Apply).collect();
    // Per task in the current run (from `start`): the index of its first write and its newest.
    let mut run: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut start = 0;
    let end_run = |run: &mut HashMap<&str, (usize, usize)>, steps: &mut [Step], start: usize, end: usize| {
        if run.len() < end - start {
            for index in start..end {
                let task = group[index].write.record().expect("a run holds logged writes only");
                let (first, last) = run[task.id.as_str()];
                if index != last {
                    steps[index] = Step::Superseded;
                } else if first != last {
                    steps[index] = Step::Merged(match &group[first].write {
                        Write::Insert(_) => Write::Insert(Arc::clone(task)),
                        Write::Update(_, expected) => Write::Update(Arc::clone(task), *expected),
                        _ => unreachable!("only inserts and updates are logged"),
                    });
                }
            }
        }
        run.clear();
    };
    for (index, job) in group.iter().enumerate() {
        match (job.logged, job.write.record()) {
            (Some(_), Some(task)) => run.entry(task.id.as_str()).or_insert((index, index)).1 = index,
            _ => {
                end_run(&mut run, &mut steps, start, index);
                start = index + 1;
            }
        }
    }
    end_run(&mut run, &mut steps, start, group.len());
    steps
}

/// Applies one write; `body` is the record's JSON when the caller has it already, and an insert
/// or update appends `history` (JSON lines) to the task's history in the same statement.
fn apply(
    tx: &rusqlite::Transaction<'_>,
    write: &Write,
    body: Option<&[u8]>,
    redo: Option<&Redo>,
    history: &str,
) -> Result<Written, StoreError> {
    let row_body = |task: &TaskRecord| -> std::borrow::Cow<'_, [u8]> {
        match body {
            Some(body) => body.into(),
            None => encode(task).into(),
        }
    };
    match write {
        Write::Insert(task) => {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO tasks (id, principal, owner, status, expires_at, version, body, history) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(backend)?;
            let inserted = stmt.execute(params![
                task.id,
                task.principal,
                task.owner,
                task.status.as_str(),
                expires_at(task),
                i64::try_from(task.version).unwrap_or(i64::MAX),
                row_body(task),
                (!history.is_empty()).then_some(history),
            ]);
            match inserted {
                Ok(_) => Ok(Written::Done),
                Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                    Err(StoreError::Duplicate(task.id.clone()))
                }
                Err(e) => Err(backend(e)),
            }
        }
        Write::Update(task, expected) => {
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE tasks SET status = ?2, expires_at = ?3, version = ?4, body = ?5, owner = ?7, \
                     history = coalesce(history, '') || ?8 \
                     WHERE id = ?1 AND version = ?6 AND status IN ('working', 'input_required')",
                )
                .map_err(backend)?;
            // The owner moves when a worker claims a task that waits for one (`owner = ''`).
            let changed = stmt
                .execute(params![
                    task.id,
                    task.status.as_str(),
                    expires_at(task),
                    i64::try_from(task.version).unwrap_or(i64::MAX),
                    row_body(task),
                    i64::try_from(*expected).unwrap_or(i64::MAX),
                    task.owner,
                    history,
                ])
                .map_err(backend)?;
            Ok(Written::Update(if changed == 1 { UpdateOutcome::Written } else { UpdateOutcome::Conflict }))
        }
        Write::Purge(before, limit) => {
            let mut select = tx
                .prepare_cached("SELECT id FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2")
                .map_err(backend)?;
            let ids = select
                .query_map(params![int(*before), int(*limit as u64)], |row| row.get::<_, String>(0))
                .map_err(backend)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(backend)?;
            delete_ids(tx, &ids, redo)
        }
        Write::PurgeFinished(now, updated_before, limit) => {
            // The last change is only in the record's JSON: an operator's purge scans terminal
            // rows, which no hot path does.
            let mut select = tx
                .prepare_cached(
                    "SELECT id FROM tasks WHERE status IN ('completed', 'failed', 'cancelled') AND \
                     ((expires_at IS NOT NULL AND expires_at <= ?1) \
                      OR json_extract(CAST(body AS TEXT), '$.updated_at_ms') <= ?2) LIMIT ?3",
                )
                .map_err(backend)?;
            let ids = select
                .query_map(params![int(*now), int(*updated_before), int(*limit as u64)], |row| row.get::<_, String>(0))
                .map_err(backend)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(backend)?;
            delete_ids(tx, &ids, redo)
        }
        Write::PurgeTasks(ids) => {
            let mut select = tx
                .prepare_cached("SELECT 1 FROM tasks WHERE id = ?1 AND status IN ('completed', 'failed', 'cancelled')")
                .map_err(backend)?;
            let mut terminal = Vec::with_capacity(ids.len());
            for id in ids {
                if select.exists([id]).map_err(backend)? {
                    terminal.push(id.clone());
                }
            }
            delete_ids(tx, &terminal, redo)
        }
        Write::AdminTake(limit) => {
            let mut select = tx
                .prepare_cached("SELECT seq, request FROM admin_requests WHERE done_at IS NULL ORDER BY seq LIMIT ?1")
                .map_err(backend)?;
            let rows = select
                .query_map(params![int(*limit as u64)], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
                .map_err(backend)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(backend)?;
            let mut requests = Vec::with_capacity(rows.len());
            for (seq, request) in rows {
                let seq = u64::try_from(seq).unwrap_or(0);
                match serde_json::from_str(&request) {
                    Ok(action) => requests.push(AdminRequest { seq, action }),
                    // Another version's request, or a damaged one: answered, never retried.
                    Err(e) => {
                        let outcome = AdminOutcome::Failed { message: format!("unreadable request {request:?}: {e}") };
                        finish_admin(tx, seq, &serde_json::to_string(&outcome).expect("outcomes serialize"))?;
                    }
                }
            }
            Ok(Written::Admin(requests))
        }
        Write::AdminDone(seq, outcome) => {
            finish_admin(tx, *seq, outcome)?;
            Ok(Written::Done)
        }
        Write::Flush => Ok(Written::Done),
    }
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn insert(&self, task: &Arc<TaskRecord>) -> Result<(), StoreError> {
        let write = Write::Insert(Arc::clone(task));
        match &self.redo {
            Some(redo) => self.log_write(redo, write, Vec::new()).map(|_| ()),
            None => self.write(write).await.map(|_| ()),
        }
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        // Pending first: a record leaves `pending` only after SQLite holds it and the reader
        // generation moved, so a miss here is always followed by a fresh enough snapshot.
        if let Some(redo) = &self.redo
            && let Some((_, record)) = redo.state.lock().pending.get(id)
        {
            return Ok(Some(TaskRecord::clone(record)));
        }
        self.get_committed(id)
    }

    async fn update(
        &self,
        task: &Arc<TaskRecord>,
        expected_version: u64,
        history: &[HistoryEntry],
    ) -> Result<UpdateOutcome, StoreError> {
        let write = Write::Update(Arc::clone(task), expected_version);
        let history = if self.history { history.to_vec() } else { Vec::new() };
        let written = match &self.redo {
            Some(redo) => self.log_write(redo, write, history)?,
            None => self.write_with(write, history).await?,
        };
        match written {
            Written::Update(outcome) => Ok(outcome),
            _ => unreachable!("an update answers with an update outcome"),
        }
    }

    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.flush().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        match owner {
            Some(owner) => self.read_many(
                "SELECT id, body FROM tasks WHERE owner = ?1 AND status IN ('working', 'input_required') LIMIT ?2",
                params![owner, limit],
            ),
            None => self.read_many(
                "SELECT id, body FROM tasks WHERE status IN ('working', 'input_required') LIMIT ?1",
                params![limit],
            ),
        }
    }

    async fn waiting(&self, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.flush().await?;
        // A task that waits for a worker has no owner; the partial index on owner finds them.
        self.read_many(
            "SELECT id, body FROM tasks WHERE owner = '' AND status IN ('working', 'input_required') \
             ORDER BY seq LIMIT ?1",
            params![i64::try_from(limit).unwrap_or(i64::MAX)],
        )
    }

    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.flush().await?;
        self.read_many(
            "SELECT id, body FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?1 \
             AND status IN ('working', 'input_required') LIMIT ?2",
            params![i64::try_from(now_ms).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX)],
        )
    }

    async fn purge_finished(&self, now_ms: u64, updated_before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        match self.write(Write::PurgeFinished(now_ms, updated_before_ms, limit)).await? {
            Written::Purged(n) => Ok(n),
            _ => unreachable!("a purge answers with a count"),
        }
    }

    async fn purge_tasks(&self, ids: &[String]) -> Result<usize, StoreError> {
        // Terminal tasks only: none is in the redo state's unfinished set.
        match self.write(Write::PurgeTasks(ids.to_vec())).await? {
            Written::Purged(n) => Ok(n),
            _ => unreachable!("a purge answers with a count"),
        }
    }

    async fn admin_requests(&self, limit: usize) -> Result<Vec<AdminRequest>, StoreError> {
        match self.write(Write::AdminTake(limit)).await? {
            Written::Admin(requests) => Ok(requests),
            _ => unreachable!("a take answers with requests"),
        }
    }

    async fn finish_admin_request(&self, seq: u64, outcome: &AdminOutcome) -> Result<(), StoreError> {
        let outcome = serde_json::to_string(outcome).expect("outcomes serialize");
        self.write(Write::AdminDone(seq, outcome)).await.map(|_| ())
    }

    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let purged = self.write(Write::Purge(before_ms, limit)).await?;
        if let Some(redo) = &self.redo {
            // Whatever the purge deleted is no longer a known unfinished task; forgetting a few
            // more than it deleted only costs their next update a read.
            let before = i64::try_from(before_ms).unwrap_or(i64::MAX);
            redo.state.lock().unfinished.retain(|_, known| known.expires_at.is_none_or(|at| at > before));
        }
        match purged {
            Written::Purged(n) => Ok(n),
            _ => unreachable!("a purge answers with a count"),
        }
    }

    async fn history(&self, id: &str) -> Result<TaskHistory, StoreError> {
        // Committed with the writes before it: a history is read from SQLite only.
        self.flush().await?;
        self.read(|conn| read_history(conn, id))
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.flush().await?;
        let n: i64 = self.read(|conn| conn.query_row("SELECT count(*) FROM tasks", [], |row| row.get(0)))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TaskEvent, TaskStatus};

    /// The redo log is rewound only once a sync covered the commits of its records: rewound
    /// earlier, its next epoch overwrote records whose commits were still only in the OS cache.
    #[test]
    fn the_redo_log_is_rewound_only_after_the_wal_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("t.db-wal");
        std::fs::write(&wal, b"").unwrap();
        let file =
            File::options().create(true).truncate(false).read(true).write(true).open(dir.path().join("r")).unwrap();
        let redo = Redo { state: Mutex::new(RedoState::new(file, None)), emptied: Condvar::new() };
        let mut sync = WalSync::new(wal.as_os_str());
        let logged = |redo: &Redo, bytes: u64| {
            let mut state = redo.state.lock();
            state.len += bytes;
            state.appended += 1;
            state.committed = state.appended; // and committed to SQLite at once
        };
        // One lock per look: a second lock in the same expression would wait on the first.
        let at = |redo: &Redo| {
            let state = redo.state.lock();
            (state.len, state.epoch)
        };
        logged(&redo, 100);
        sync.committed(); // not a second since the last sync: no sync yet
        rewind_redo(&redo, &mut sync, false);
        assert_eq!(at(&redo), (100, 1), "rewound before the sync");
        sync.sync();
        rewind_redo(&redo, &mut sync, false);
        assert_eq!(at(&redo), (0, 2), "synced and caught up: rewound");

        // A long log, or a closing store, is synced at once to be rewound.
        logged(&redo, REWIND_AT);
        sync.committed();
        rewind_redo(&redo, &mut sync, false);
        assert_eq!(at(&redo), (0, 3));
        logged(&redo, 10);
        sync.committed();
        rewind_redo(&redo, &mut sync, true);
        assert_eq!(at(&redo), (0, 4));

        // A write logged but not committed yet keeps the log, synced or not.
        logged(&redo, 10);
        redo.state.lock().appended += 1;
        sync.committed();
        rewind_redo(&redo, &mut sync, true);
        assert_eq!(redo.state.lock().len, 10);
    }

    fn frame(epoch: u64, kind: u8, task: &TaskRecord) -> Vec<u8> {
        let mut frame = Vec::new();
        redo_frame(&mut frame, epoch, kind, task).unwrap();
        frame
    }

    fn record(id: &str) -> TaskRecord {
        TaskRecord::new(id.into(), "p".into(), "o".into(), "t".into(), 0, None, None)
    }

    fn logged(write: Write) -> Job {
        Job { write, history: Vec::new(), reply: None, logged: Some(1), body: None, history_json: None }
    }

    #[test]
    fn a_run_of_logged_writes_folds_into_one_write_per_task_and_stops_at_a_waited_write() {
        let mut a = record("a");
        let a1 = Arc::new(a.clone());
        a.apply(1, TaskEvent::SetStatusMessage("m".into())).unwrap();
        let a2 = Arc::new(a.clone());
        a.apply(2, TaskEvent::Cancel).unwrap();
        let a3 = Arc::new(a.clone());
        let b = Arc::new(record("b"));
        let (reply, _rx) = oneshot::channel();
        let group = vec![
            logged(Write::Insert(Arc::clone(&a1))),
            logged(Write::Insert(Arc::clone(&b))),
            logged(Write::Update(Arc::clone(&a2), 1)),
            Job {
                write: Write::Purge(0, 1),
                history: Vec::new(),
                reply: Some(reply),
                logged: None,
                body: None,
                history_json: None,
            },
            logged(Write::Update(Arc::clone(&a3), 2)),
        ];
        let steps = coalesce(&group);
        assert!(matches!(steps[0], Step::Superseded), "a's insert is folded into its newest record");
        assert!(matches!(steps[1], Step::Apply), "b is written once anyway");
        assert!(matches!(&steps[2], Step::Merged(Write::Insert(t)) if Arc::ptr_eq(t, &a2)));
        assert!(matches!(steps[3], Step::Apply), "the waited write is its own");
        assert!(matches!(steps[4], Step::Apply), "nothing is moved across a waited write");
        let updates = vec![logged(Write::Update(Arc::clone(&a2), 1)), logged(Write::Update(Arc::clone(&a3), 2))];
        let steps = coalesce(&updates);
        assert!(matches!(steps[0], Step::Superseded));
        assert!(
            matches!(&steps[1], Step::Merged(Write::Update(t, 1)) if Arc::ptr_eq(t, &a3)),
            "expects the stored version"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_created_and_finished_within_a_commit_are_stored_as_they_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path).unwrap();
        let mut finals = Vec::new();
        for i in 0..300 {
            let mut task = record(&format!("t{i:03}"));
            store.insert(&Arc::new(task.clone())).await.unwrap();
            for step in 1..=(i % 4) as u64 {
                let event = if step == 3 { TaskEvent::Cancel } else { TaskEvent::SetStatusMessage(format!("{step}")) };
                task.apply(step, event).unwrap();
                assert_eq!(store.update(&Arc::new(task.clone()), step, &[]).await.unwrap(), UpdateOutcome::Written);
            }
            finals.push(task);
        }
        store.flush().await.unwrap();
        store.close();
        drop(store);
        // Read back from SQLite alone: the log was emptied once every write was committed.
        assert_eq!(std::fs::metadata(dir.path().join("t.db-redo")).map(|m| m.len()).unwrap_or(0), 0);
        let store = SqliteStore::open(&path).unwrap();
        for task in &finals {
            assert_eq!(store.get(&task.id).await.unwrap().as_ref(), Some(task));
        }
        // A terminal row is frozen in SQLite as it was before the folding.
        let mut late = finals[3].clone();
        late.version = 9;
        assert_eq!(store.update(&Arc::new(late), 3, &[]).await.unwrap(), UpdateOutcome::Conflict);
    }

    #[tokio::test]
    async fn a_redo_log_is_replayed_once_and_a_torn_tail_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        // SQLite already holds `b` at version 2 (its redo record below is older) and `c`
        // terminal; the log adds `a`, moves it on, and ends in a torn record for `d`.
        let mut b = record("b");
        let mut c = record("c");
        {
            let store = SqliteStore::open_with(&path, Durability::Full).unwrap();
            store.insert(&Arc::new(b.clone())).await.unwrap();
            store.insert(&Arc::new(c.clone())).await.unwrap();
            b.apply(1, TaskEvent::SetStatusMessage("new".into())).unwrap();
            store.update(&Arc::new(b.clone()), 1, &[]).await.unwrap();
            c.apply(1, TaskEvent::Cancel).unwrap();
            store.update(&Arc::new(c.clone()), 1, &[]).await.unwrap();
            store.close();
        }
        let mut a = record("a");
        let mut log = frame(7, REDO_INSERT, &a);
        a.apply(2, TaskEvent::SetStatusMessage("a2".into())).unwrap();
        log.extend(frame(7, REDO_UPDATE, &a));
        log.extend(frame(7, REDO_INSERT, &record("b")));
        let mut c_forged = record("c");
        c_forged.version = 9;
        log.extend(frame(7, REDO_UPDATE, &c_forged));
        let torn = frame(7, REDO_INSERT, &record("d"));
        log.extend(&torn[..torn.len() - 3]);
        let mut rewound = frame(8, REDO_INSERT, &record("e"));
        // A log rewound after its records were committed: the new epoch's records, then the
        // rest of the old epoch's, which replay must not read.
        rewound.extend(frame(7, REDO_INSERT, &record("f")));
        let dir2 = tempfile::tempdir().unwrap();
        std::fs::write(dir2.path().join("t.db-redo"), &rewound).unwrap();
        let other = SqliteStore::open(dir2.path().join("t.db")).unwrap();
        assert!(other.get("e").await.unwrap().is_some());
        assert!(other.get("f").await.unwrap().is_none(), "an older epoch is not replayed");
        let redo_path = dir.path().join("t.db-redo");
        std::fs::write(&redo_path, &log).unwrap();

        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&redo_path).unwrap().len(), 0, "a replayed log is emptied");
        let got_a = store.get("a").await.unwrap().unwrap();
        assert_eq!((got_a.version, got_a.status_message.as_deref()), (2, Some("a2")));
        let got_b = store.get("b").await.unwrap().unwrap();
        assert_eq!((got_b.version, got_b.status_message.as_deref()), (2, Some("new")), "older records change nothing");
        assert_eq!(store.get("c").await.unwrap().unwrap().status, TaskStatus::Cancelled, "terminal rows never change");
        assert!(store.get("d").await.unwrap().is_none(), "a torn record is not a write");
        assert_eq!(store.count().await.unwrap(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_purged_task_is_not_brought_back_by_replaying_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let redo_path = dir.path().join("t.db-redo");
        let mut task = TaskRecord::new("gone".into(), "p".into(), "o".into(), "t".into(), 0, Some(10), None);
        let keep = record("kept");
        let store = SqliteStore::open(&path).unwrap();
        store.insert(&Arc::new(task.clone())).await.unwrap();
        store.insert(&Arc::new(keep.clone())).await.unwrap();
        task.apply(20, TaskEvent::Expire).unwrap();
        store.update(&Arc::new(task.clone()), 1, &[]).await.unwrap();
        assert_eq!(store.purge(1_000, 100).await.unwrap(), 1);
        // A crash now: the log (rewound, not truncated) still holds the insert of `gone`.
        let log = std::fs::read(&redo_path).unwrap();
        std::mem::forget(store);
        assert!(
            read_redo(&log).iter().any(|r| matches!(r, RedoRecord::Delete(ids) if ids == &["gone"])),
            "the purge is in the log"
        );
        let dir2 = tempfile::tempdir().unwrap();
        std::fs::copy(&path, dir2.path().join("t.db")).unwrap();
        for suffix in ["-wal", "-shm"] {
            let from = dir.path().join(format!("t.db{suffix}"));
            if from.exists() {
                std::fs::copy(&from, dir2.path().join(format!("t.db{suffix}"))).unwrap();
            }
        }
        std::fs::write(dir2.path().join("t.db-redo"), &log).unwrap();
        let reopened = SqliteStore::open(dir2.path().join("t.db")).unwrap();
        assert!(reopened.get("gone").await.unwrap().is_none(), "a purged task stays purged");
        assert!(reopened.get("kept").await.unwrap().is_some());
    }

    #[test]
    fn a_damaged_record_that_still_parses_ends_the_log() {
        let mut a = record("a");
        let mut log = frame(7, REDO_INSERT, &a);
        a.apply(2, TaskEvent::SetStatusMessage("m".into())).unwrap();
        let update = frame(7, REDO_UPDATE, &a);
        let at = log.len();
        log.extend(&update);
        log.extend(frame(7, REDO_INSERT, &record("b")));
        assert_eq!(read_redo(&log).len(), 3);
        // One bit of the version's digit (`2` becomes `0`): still a valid record, not the one written.
        let digit = at + update.windows(10).position(|w| w == b"\"version\":").unwrap() + 10;
        assert_eq!(log[digit], b'2');
        log[digit] ^= 0b10;
        let read = read_redo(&log);
        assert_eq!(read.len(), 1, "the damaged record and everything after it are not replayed");
        assert!(matches!(&read[0], RedoRecord::Insert(task) if task.id == "a"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn logged_writes_are_checked_like_sqlite_checks_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("t.db")).unwrap();
        let mut task = record("x");
        store.insert(&Arc::new(task.clone())).await.unwrap();
        assert!(
            matches!(store.insert(&Arc::new(task.clone())).await, Err(StoreError::Duplicate(_))),
            "pending duplicate"
        );
        store.flush().await.unwrap();
        assert!(
            matches!(store.insert(&Arc::new(task.clone())).await, Err(StoreError::Duplicate(_))),
            "committed duplicate"
        );
        task.apply(1, TaskEvent::Cancel).unwrap();
        assert_eq!(
            store.update(&Arc::new(task.clone()), 7, &[]).await.unwrap(),
            UpdateOutcome::Conflict,
            "wrong version"
        );
        assert_eq!(store.update(&Arc::new(task.clone()), 1, &[]).await.unwrap(), UpdateOutcome::Written);
        let mut again = task.clone();
        again.version += 1;
        assert_eq!(
            store.update(&Arc::new(again.clone()), task.version, &[]).await.unwrap(),
            UpdateOutcome::Conflict,
            "terminal"
        );
        assert_eq!(
            store.update(&Arc::new(record("missing")), 1, &[]).await.unwrap(),
            UpdateOutcome::Conflict,
            "unknown"
        );
        store.flush().await.unwrap();
        assert_eq!(store.get("x").await.unwrap().unwrap().status, TaskStatus::Cancelled);
        assert_eq!(store.redo.as_ref().unwrap().state.lock().pending.len(), 0, "committed records leave memory");
    }
}
