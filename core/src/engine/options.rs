//! [`EngineOptions`]: the engine settings an SDK adapter takes from its users as JSON (the
//! TypeScript server's options), with every default from [`EngineConfig`], so no binding holds
//! a default of its own.

use std::sync::Arc;

use serde::{Deserialize, Deserializer};

use super::{Engine, EngineConfig};
use crate::clock::{ManualClock, SequentialIds};
use crate::store::{self, StoreError};

/// The store a server opens when its user names none: a SQLite file in the working directory.
/// (A `sqlite://` URL names the path after its scheme: `sqlite:///mcp-tasks.db` would be a file at
/// the filesystem's root, which a process not run by root cannot create.)
pub const DEFAULT_STORE: &str = "sqlite://mcp-tasks.db";

/// Engine settings as an adapter's users write them (camelCase JSON; unknown fields refused).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineOptions {
    /// The store URL (`sqlite:///path.db[?durability=full]`, `memory://`, `postgres://...`);
    /// absent is [`DEFAULT_STORE`].
    pub store: Option<String>,
    /// TTL of a task whose tool sets none: absent takes the default, `null` is unlimited.
    #[serde(default, deserialize_with = "present")]
    pub default_ttl_ms: Option<Option<u64>>,
    /// `pollIntervalMs` of a task whose tool sets none.
    pub default_poll_interval_ms: Option<u64>,
    /// How long an expired task stays readable before it is purged.
    pub purge_grace_ms: Option<u64>,
    /// The most live tasks one principal may have (no cap when absent).
    pub max_live_tasks_per_principal: Option<u64>,
    /// The most live tasks in total (no cap when absent).
    pub max_live_tasks: Option<u64>,
    /// On a shared store: how long this worker's lease lasts (ms); its tasks are failed, or
    /// resumed elsewhere, that long after it dies.
    pub worker_lease_ms: Option<u64>,
    /// Where the work of tasks runs: `"local"` (absent) or `"workers"` (a front-end that only
    /// accepts; the adapter enqueues with [`Engine::enqueue_task`]).
    #[serde(default)]
    pub execution: super::Execution,
    /// Tests and shared vectors only: a manual clock starting here, moved by the adapter, and
    /// no background sweeper.
    pub clock_start_ms: Option<u64>,
    /// Tests and shared vectors only: sequential task ids `{prefix}-1`, `{prefix}-2`, ...
    pub id_prefix: Option<String>,
}

/// A field that is present (`null` included) becomes `Some`, so `null` and absence differ.
pub(super) fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(deserializer).map(Some)
}

/// An engine [`EngineOptions::open`] built, with its manual clock when it has one.
pub struct OpenedEngine {
    /// The engine (its sweeper is the caller's to start, unless `clock` is set).
    pub engine: Engine,
    /// The manual clock (`clockStartMs`): the caller moves it and runs the sweeps.
    pub clock: Option<Arc<ManualClock>>,
}

impl EngineOptions {
    /// The engine configuration these options give.
    pub fn config(&self) -> EngineConfig {
        let defaults = EngineConfig::default();
        EngineConfig {
            default_ttl_ms: self.default_ttl_ms.unwrap_or(defaults.default_ttl_ms),
            default_poll_interval_ms: self.default_poll_interval_ms.unwrap_or(defaults.default_poll_interval_ms),
            purge_grace_ms: self.purge_grace_ms.unwrap_or(defaults.purge_grace_ms),
            max_live_tasks_per_principal: self.max_live_tasks_per_principal.or(defaults.max_live_tasks_per_principal),
            max_live_tasks: self.max_live_tasks.or(defaults.max_live_tasks),
            worker_lease: self.worker_lease_ms.map_or(defaults.worker_lease, std::time::Duration::from_millis),
            ..defaults
        }
    }

    /// Opens the store and builds the engine.
    pub async fn open(&self) -> Result<OpenedEngine, StoreError> {
        let store = store::open(self.store.as_deref().unwrap_or(DEFAULT_STORE)).await?;
        let clock = self.clock_start_ms.map(|start| Arc::new(ManualClock::new(start)));
        let mut builder = Engine::builder(store).config(self.config());
        if let Some(clock) = &clock {
            builder = builder.clock(clock.clone());
        }
        if let Some(prefix) = &self.id_prefix {
            builder = builder.ids(Arc::new(SequentialIds::new(prefix.clone())));
        }
        Ok(OpenedEngine { engine: builder.build().await?, clock })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_unlimited_and_absence_the_default() {
        let absent: EngineOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(absent.config().default_ttl_ms, EngineConfig::default().default_ttl_ms);
        let unlimited: EngineOptions = serde_json::from_str(r#"{"defaultTtlMs": null}"#).unwrap();
        assert_eq!(unlimited.config().default_ttl_ms, None);
        let set: EngineOptions = serde_json::from_str(r#"{"defaultTtlMs": 5}"#).unwrap();
        assert_eq!(set.config().default_ttl_ms, Some(5));
    }

    #[test]
    #[cfg(feature = "sqlite")]
    fn the_default_store_is_a_file_in_the_working_directory() {
        let (path, query) = store::sqlite_url(DEFAULT_STORE).unwrap();
        assert_eq!((path, query), ("mcp-tasks.db", ""));
        assert!(std::path::Path::new(path).is_relative());
    }

    #[test]
    fn unknown_options_are_refused() {
        let err = serde_json::from_str::<EngineOptions>(r#"{"stor": "memory://"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `stor`"), "{err}");
    }
}
