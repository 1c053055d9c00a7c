//! The redo log's replay after a crash: a log of real writes (inserts, then transitions through
//! the one transition function), of which SQLite already holds the first `c`, is torn at any
//! byte and has up to three bits flipped. Replay must never panic, must read back exactly a
//! prefix of the records written (never a damaged one as if it were a write), and must leave
//! each task as the model of those writes says: inserts when absent, updates only over an older
//! unfinished version, terminal rows never changed; and each task's history holds exactly the
//! entries of the writes applied (an update's entries come with it or not at all).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use mcp_tasks::store::fuzz::{RedoRecord, read_redo, redo_frame, replay, replay_history};
use mcp_tasks_protocol::{HistoryEntry, RpcError, TaskEvent, TaskRecord};
use serde_json::json;

/// Reads the input a byte at a time, then zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    fn text(&mut self) -> String {
        let len = usize::from(self.byte() % 24);
        (0..len).map(|_| char::from(b' ' + self.byte() % 95)).collect()
    }
}

/// A task as the model stores it: the record and its history.
type Stored = (TaskRecord, Vec<HistoryEntry>);

fn apply(state: &mut BTreeMap<String, Stored>, record: &RedoRecord) {
    match record {
        RedoRecord::Insert(task) => {
            state.entry(task.id.clone()).or_insert_with(|| (task.clone(), vec![HistoryEntry::created(task)]));
        }
        RedoRecord::Update(task, history) => {
            if let Some((stored, entries)) = state.get_mut(&task.id)
                && stored.version < task.version
                && !stored.status.is_terminal()
            {
                *stored = task.clone();
                entries.extend(history.iter().cloned());
            }
        }
        RedoRecord::Delete(ids) => {
            for id in ids {
                state.remove(id);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // Arbitrary bytes as a log: no panic, whatever they hold.
    let _ = read_redo(data);
    let mut input = Input(data);
    let epoch = u64::from(input.byte()) + 1;
    let mut writes: Vec<RedoRecord> = Vec::new();
    let mut live: Vec<TaskRecord> = Vec::new();
    for step in 0..usize::from(input.byte() % 24) {
        let now = 1_000 + step as u64;
        let choice = input.byte();
        if live.is_empty() || choice % 4 == 0 {
            let ttl = (choice % 8 == 0).then_some(u64::from(input.byte()));
            let task = TaskRecord::new(format!("t{step:02}"), "alice".into(), "o".into(), input.text(), now, ttl, None);
            writes.push(RedoRecord::Insert(task.clone()));
            live.push(task);
            continue;
        }
        if choice % 16 == 1 {
            // A purge: the terminal tasks leave the store (and the model).
            let (gone, kept): (Vec<TaskRecord>, Vec<TaskRecord>) = live.drain(..).partition(|t| t.status.is_terminal());
            live = kept;
            if !gone.is_empty() {
                writes.push(RedoRecord::Delete(gone.into_iter().map(|t| t.id).collect()));
            }
            if live.is_empty() {
                continue;
            }
        }
        let at = usize::from(input.byte()) % live.len();
        let event = match choice % 6 {
            0 | 1 => TaskEvent::SetStatusMessage(input.text()),
            2 => TaskEvent::Complete(json!({"content": [{"type": "text", "text": input.text()}]})),
            3 => TaskEvent::Fail(RpcError { code: -32603, message: input.text(), data: None }),
            4 => TaskEvent::Cancel,
            _ => TaskEvent::Expire,
        };
        let task = &mut live[at];
        if let Ok(applied) = task.apply(now, event) {
            writes.push(RedoRecord::Update(task.clone(), applied.history));
        }
    }
    // The log is rewound (not truncated) once SQLite holds every logged write: the writes
    // before `rewind` went out in the previous epoch and are all committed; the rest are this
    // epoch's, written over the start of the old bytes, of which SQLite holds those before
    // `committed`.
    let rewind = usize::from(input.byte()) % (writes.len() + 1);
    let committed = rewind + usize::from(input.byte()) % (writes.len() - rewind + 1);
    let mut old = Vec::new();
    for record in &writes[..rewind] {
        old.extend(redo_frame(epoch - 1, record));
    }
    let mut log = Vec::new();
    let mut committed_bytes = 0;
    for (i, record) in writes.iter().enumerate().skip(rewind) {
        log.extend(redo_frame(epoch, record));
        if i < committed {
            committed_bytes = log.len();
        }
    }
    let current = log.len();
    if old.len() > current {
        log.extend_from_slice(&old[current..]);
    }
    // A crash tears what was being written: a cut anywhere after the records SQLite holds
    // (a record is committed only after its append returned).
    let damage = input.byte();
    if damage & 1 != 0 && current > committed_bytes {
        let at = committed_bytes
            + (usize::from(input.byte()) << 8 | usize::from(input.byte())) % (current - committed_bytes);
        log.truncate(at);
    }
    // Damage no crash makes (a disk's): up to three flipped bits anywhere.
    let flips = (damage >> 1) % 4;
    for _ in 0..flips {
        if log.is_empty() {
            break;
        }
        let at = (usize::from(input.byte()) << 8 | usize::from(input.byte())) % log.len();
        log[at] ^= 1 << (input.byte() % 8);
    }

    // Only whole records exactly as written, in order, from the epoch at the start of the file.
    let read = read_redo(&log);
    let epoch_writes = if current > 0 { &writes[rewind..] } else { &writes[..rewind] };
    assert!(read.len() <= epoch_writes.len(), "more records read than written");
    assert_eq!(read, epoch_writes[..read.len()], "replay read a record that was not written");

    let mut stored = BTreeMap::new();
    for record in &writes[..committed] {
        apply(&mut stored, record);
    }
    let before: Vec<TaskRecord> = stored.values().map(|(task, _)| task.clone()).collect();
    let before_history: Vec<Stored> = stored.values().cloned().collect();
    let mut expected = stored;
    for record in &read {
        apply(&mut expected, record);
    }
    let replayed = replay(&before, &log).expect("replay succeeds on any log");
    assert_eq!(replayed, expected.values().map(|(task, _)| task.clone()).collect::<Vec<_>>());
    let histories = replay_history(&before_history, &log).expect("replay succeeds on any log");
    let expected_histories: Vec<(String, Vec<HistoryEntry>)> =
        expected.iter().map(|(id, (_, history))| (id.clone(), history.clone())).collect();
    assert_eq!(histories, expected_histories, "a history does not match its task's writes");
    if flips == 0 {
        // After a crash, the store is exactly as after the writes up to the last one read back
        // (or the last one committed, if later): nothing acknowledged and logged intact is
        // lost, nothing purged comes back, nothing goes back in time.
        let upto = if current > 0 { committed.max(rewind + read.len()) } else { committed };
        let mut truth = BTreeMap::new();
        for record in &writes[..upto] {
            apply(&mut truth, record);
        }
        assert_eq!(expected, truth, "replay left a state the writes never made");
    }
});
