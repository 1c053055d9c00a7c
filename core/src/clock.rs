//! Where time and ids come from. The engine reads both through these traits so tests can drive
//! a [`ManualClock`] and [`SequentialIds`] deterministically.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock time in Unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// The current time in Unix milliseconds.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that moves only when told to; for tests and vector replay.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        Self(AtomicU64::new(start_ms))
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock; time must not go backwards, so earlier values are ignored.
    pub fn set(&self, now_ms: u64) {
        self.0.fetch_max(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A source of unique ids (task ids, owner ids, listen stream ids).
pub trait IdGenerator: Send + Sync + 'static {
    /// A new id, never returned before.
    fn next_id(&self) -> String;
}

/// Unguessable ids: a 64-bit time prefix then 128 bits from the operating system's CSPRNG,
/// hex-encoded (48 characters), so a task id can serve as a bearer handle (the extension's "Security Considerations"). The
/// prefix is the Unix millisecond times 65,536 plus a counter, and increases with every id this
/// process makes: ids sort in creation order, which keeps index inserts at the tail of a B-tree
/// instead of dirtying a random page per create, and lets a store tell a new id from a stored
/// one without reading (an id above every stored one is new). It reveals only the creation
/// time, which `createdAt` shows anyway; the random part alone carries the unguessability.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomIds;

/// The last time prefix [`RandomIds`] handed out in this process.
static LAST_PREFIX: AtomicU64 = AtomicU64::new(0);

impl IdGenerator for RandomIds {
    fn next_id(&self) -> String {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS CSPRNG is available");
        let now = SystemClock.now_ms() << 16;
        let previous = LAST_PREFIX
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(now.max(last + 1)))
            .expect("the update always succeeds");
        let prefix = now.max(previous + 1);
        format!("{prefix:016x}{}", hex::encode(bytes))
    }
}

/// A fresh 32-byte secret from the OS CSPRNG: the key a server seals MRTR `requestState` with
/// when its user gives none (it lives as long as the process).
pub fn random_key() -> Vec<u8> {
    let mut key = vec![0u8; 32];
    getrandom::fill(&mut key).expect("the OS CSPRNG is available");
    key
}

/// Predictable ids `prefix-1`, `prefix-2`, …; for tests and vector replay only.
#[derive(Debug)]
pub struct SequentialIds {
    prefix: String,
    next: AtomicU64,
}

impl SequentialIds {
    /// Ids `prefix-1`, `prefix-2`, ….
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), next: AtomicU64::new(1) }
    }
}

impl IdGenerator for SequentialIds {
    fn next_id(&self) -> String {
        format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::SeqCst))
    }
}
