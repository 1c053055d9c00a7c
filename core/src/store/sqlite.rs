//! The embedded default store: one SQLite file in WAL mode.
//!
//! All writes go through one writer thread that commits them in groups: it takes the first
//! pending write, drains every other write already queued (up to [`MAX_GROUP`]), runs them in
//! one transaction and answers each caller after the single commit. Under concurrency, one
//! fsync covers hundreds of creates, which is what keeps durable creates fast. Reads use a small
//! pool of read-only connections and never wait for the writer (WAL).
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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::{StoreError, TaskStore, UpdateOutcome, backend, decode, encode};
use crate::protocol::TaskRecord;

/// The most writes committed in one transaction.
pub(crate) const MAX_GROUP: usize = 2048;
const READERS: usize = 4;

/// How hard a commit works to survive failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: every group commit is fsynced; survives power loss.
    #[default]
    Full,
    /// `synchronous=NORMAL`: survives a process crash (kill -9) but may lose the last commits on
    /// power loss.
    Normal,
}

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
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks(owner) WHERE status IN ('working', 'input_required');
CREATE INDEX IF NOT EXISTS tasks_expiry ON tasks(expires_at) WHERE expires_at IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS tasks_terminal_immutable BEFORE UPDATE ON tasks
    WHEN OLD.status IN ('completed', 'failed', 'cancelled')
    BEGIN SELECT RAISE(ABORT, 'terminal tasks never change'); END;
PRAGMA user_version = 1;
";

enum Write {
    Insert(Box<TaskRecord>),
    Update(Box<TaskRecord>, u64),
    Purge(u64, usize),
}

enum Written {
    Done,
    Update(UpdateOutcome),
    Purged(usize),
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

struct Job {
    write: Write,
    reply: oneshot::Sender<Result<Written, StoreError>>,
}

/// Where writes are committed.
enum Writer {
    /// [`Durability::Full`]: a writer thread commits whatever queued up while the last fsync ran
    /// as one transaction (group commit), so callers never wait inside an fsync themselves.
    Thread(Mutex<Option<mpsc::Sender<Job>>>),
    /// [`Durability::Normal`]: the caller commits on its own thread. Without an fsync a commit is
    /// a WAL append of a few microseconds, cheaper than the two thread wake-ups of handing it
    /// to a writer thread and back (measured: a sequential create took ~0.5 ms more that way).
    Inline(Mutex<Option<Connection>>),
}

/// Tasks in one SQLite file (WAL). One host process may open a file at a time; a second open
/// fails with [`StoreError::Locked`].
pub struct SqliteStore {
    path: PathBuf,
    writer: Writer,
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

fn expires_at(task: &TaskRecord) -> Option<i64> {
    task.expires_at_ms().map(|ms| i64::try_from(ms).unwrap_or(i64::MAX))
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` with full durability.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Full)
    }

    /// Opens the store at `path` with the given durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
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

        let writer_conn = Connection::open(&path).map_err(backend)?;
        writer_conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(backend)?;
        writer_conn.pragma_update(None, "journal_mode", "WAL").map_err(backend)?;
        let sync = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        writer_conn.pragma_update(None, "synchronous", sync).map_err(backend)?;
        // An 8 MiB page cache holds the B-tree tails that group commits touch (a larger one
        // measured slower: SQLite walks the whole cache when a write transaction starts after
        // the WAL changed), and a 16 MiB WAL between checkpoints amortizes copying pages back.
        writer_conn.pragma_update(None, "cache_size", -8_192).map_err(backend)?;
        writer_conn.pragma_update(None, "wal_autocheckpoint", 4_096).map_err(backend)?;
        writer_conn.execute_batch(SCHEMA).map_err(backend)?;

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
        let (writer, thread) = match durability {
            Durability::Normal => (Writer::Inline(Mutex::new(Some(writer_conn))), None),
            Durability::Full => {
                let (tx, rx) = mpsc::channel::<Job>();
                let thread_readers = Arc::clone(&readers);
                let thread = std::thread::Builder::new()
                    .name("mcp-tasks-sqlite-writer".into())
                    .spawn(move || writer_loop(writer_conn, &rx, &thread_readers))
                    .map_err(backend)?;
                (Writer::Thread(Mutex::new(Some(tx))), Some(thread))
            }
        };
        Ok(Self {
            path,
            writer,
            writer_thread: Mutex::new(thread),
            readers,
            next_reader: AtomicUsize::new(0),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn write(&self, write: Write) -> Result<Written, StoreError> {
        let sender = match &self.writer {
            Writer::Inline(conn) => {
                let mut conn = conn.lock();
                let conn = conn.as_mut().ok_or(StoreError::Closed)?;
                let result = commit_one(conn, &write);
                // Before the caller learns of this write: later reads must start a fresh snapshot.
                self.readers.committed();
                return result;
            }
            Writer::Thread(sender) => sender,
        };
        let (reply, rx) = oneshot::channel();
        {
            let writer = sender.lock();
            let sender = writer.as_ref().ok_or(StoreError::Closed)?;
            sender.send(Job { write, reply }).map_err(|_| StoreError::Closed)?;
        }
        rx.await.map_err(|_| StoreError::Closed)?
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
        match &self.writer {
            Writer::Thread(sender) => drop(sender.lock().take()),
            Writer::Inline(conn) => drop(conn.lock().take()),
        }
        if let Some(thread) = self.writer_thread.lock().take() {
            let _ = thread.join();
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

fn writer_loop(mut conn: Connection, rx: &mpsc::Receiver<Job>, readers: &Readers) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Ok(first) = rx.recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let results = commit_group(&mut conn, &group);
        // Before anyone learns of these writes: later reads must start a fresh snapshot.
        readers.committed();
        for (job, result) in group.drain(..).zip(results) {
            let _ = job.reply.send(result);
        }
    }
}

fn commit_group(conn: &mut Connection, group: &[Job]) -> Vec<Result<Written, StoreError>> {
    let tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => return group.iter().map(|_| Err(StoreError::Backend(e.to_string().into()))).collect(),
    };
    let results: Vec<Result<Written, StoreError>> = group.iter().map(|job| apply(&tx, &job.write)).collect();
    match tx.commit() {
        Ok(()) => results,
        Err(e) => group.iter().map(|_| Err(StoreError::Backend(e.to_string().into()))).collect(),
    }
}

fn commit_one(conn: &mut Connection, write: &Write) -> Result<Written, StoreError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(backend)?;
    let result = apply(&tx, write)?;
    tx.commit().map_err(backend)?;
    Ok(result)
}

fn apply(tx: &rusqlite::Transaction<'_>, write: &Write) -> Result<Written, StoreError> {
    match write {
        Write::Insert(task) => {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO tasks (id, principal, owner, status, expires_at, version, body) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(backend)?;
            let inserted = stmt.execute(params![
                task.id,
                task.principal,
                task.owner,
                task.status.as_str(),
                expires_at(task),
                i64::try_from(task.version).unwrap_or(i64::MAX),
                encode(task),
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
                    "UPDATE tasks SET status = ?2, expires_at = ?3, version = ?4, body = ?5 \
                     WHERE id = ?1 AND version = ?6 AND status IN ('working', 'input_required')",
                )
                .map_err(backend)?;
            let changed = stmt
                .execute(params![
                    task.id,
                    task.status.as_str(),
                    expires_at(task),
                    i64::try_from(task.version).unwrap_or(i64::MAX),
                    encode(task),
                    i64::try_from(*expected).unwrap_or(i64::MAX),
                ])
                .map_err(backend)?;
            Ok(Written::Update(if changed == 1 { UpdateOutcome::Written } else { UpdateOutcome::Conflict }))
        }
        Write::Purge(before, limit) => {
            let mut stmt = tx
                .prepare_cached(
                    "DELETE FROM tasks WHERE id IN \
                     (SELECT id FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2)",
                )
                .map_err(backend)?;
            let deleted = stmt
                .execute(params![i64::try_from(*before).unwrap_or(i64::MAX), i64::try_from(*limit).unwrap_or(i64::MAX)])
                .map_err(backend)?;
            Ok(Written::Purged(deleted))
        }
    }
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn insert(&self, task: &TaskRecord) -> Result<(), StoreError> {
        self.write(Write::Insert(Box::new(task.clone()))).await.map(|_| ())
    }

    async fn get(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        let body: Option<Vec<u8>> = self.read(|conn| {
            conn.prepare_cached("SELECT body FROM tasks WHERE id = ?1")?.query_row([id], |row| row.get(0)).optional()
        })?;
        body.map(|body| decode(id, &body)).transpose()
    }

    async fn update(&self, task: &TaskRecord, expected_version: u64) -> Result<UpdateOutcome, StoreError> {
        match self.write(Write::Update(Box::new(task.clone()), expected_version)).await? {
            Written::Update(outcome) => Ok(outcome),
            _ => unreachable!("an update answers with an update outcome"),
        }
    }

    async fn unfinished(&self, owner: Option<&str>, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
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

    async fn expired_unfinished(&self, now_ms: u64, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        self.read_many(
            "SELECT id, body FROM tasks WHERE expires_at IS NOT NULL AND expires_at <= ?1 \
             AND status IN ('working', 'input_required') LIMIT ?2",
            params![i64::try_from(now_ms).unwrap_or(i64::MAX), i64::try_from(limit).unwrap_or(i64::MAX)],
        )
    }

    async fn purge(&self, before_ms: u64, limit: usize) -> Result<usize, StoreError> {
        match self.write(Write::Purge(before_ms, limit)).await? {
            Written::Purged(n) => Ok(n),
            _ => unreachable!("a purge answers with a count"),
        }
    }

    async fn count(&self) -> Result<u64, StoreError> {
        let n: i64 = self.read(|conn| conn.query_row("SELECT count(*) FROM tasks", [], |row| row.get(0)))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
