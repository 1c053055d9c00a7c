//! The decoding of a stored row (SQLite's and PostgreSQL's `body`): any bytes are refused or
//! read without a panic; what is read encodes and reads back to itself; and the transition
//! function on it keeps terminal states final.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_tasks::store::fuzz::decode_row;
use mcp_tasks_protocol::TaskEvent;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = decode_row("x", data) else { return };
    let encoded = serde_json::to_vec(&record).expect("a record encodes");
    assert_eq!(decode_row("x", &encoded).expect("an encoded record decodes"), record);
    for event in [TaskEvent::SetStatusMessage("m".into()), TaskEvent::Cancel, TaskEvent::Expire] {
        let mut task = record.clone();
        let terminal = task.status.is_terminal();
        let outcome = task.apply(task.updated_at_ms, event);
        if terminal {
            assert!(outcome.is_err(), "a terminal task changed");
            assert_eq!(task, record, "a refused event changed the task");
        }
    }
});
