//! cleave's log store (`cleave::log_store`) as an engine: it runs
//! logappend, each logical log of the benchmark one log of the store, and
//! refuses the key-value benchmarks.

use std::sync::{Arc, RwLock};

use anyhow::{anyhow, bail, Result};
use cleave::log_store::{LogId, LogOptions, LogStore};

use super::{Engine, EngineConfig, EngineCounters, ScanOutcome};

pub struct LogStoreEngine {
    store: LogStore,
    /// The store's log for each benchmark log number, created on first use.
    logs: RwLock<Vec<Option<LogId>>>,
}

impl LogStoreEngine {
    pub fn open(config: &EngineConfig) -> Result<Self> {
        if config.ttl.is_some() {
            bail!("the log store keeps records until they are trimmed: it has no --ttl_seconds");
        }
        let opts = LogOptions {
            fs: Arc::new(cleave::vfs::OsFs::new()),
            create_if_missing: true,
            data_file_bytes: config.log_file_bytes,
            preallocate: config.log_preallocate,
            sync: config.sync,
            ..LogOptions::default()
        };
        let engine = LogStoreEngine {
            store: LogStore::open(&config.path, opts)?,
            logs: RwLock::new(Vec::new()),
        };
        // A log store's logs outlive its appends: made before the run.
        for log in 0..config.logs {
            engine.log(log)?;
        }
        Ok(engine)
    }

    fn log(&self, log: u32) -> Result<LogId> {
        let slot = log as usize;
        let known = self
            .logs
            .read()
            .map_err(|_| anyhow!("log table poisoned"))?
            .get(slot)
            .copied()
            .flatten();
        if let Some(id) = known {
            return Ok(id);
        }
        let mut logs = self
            .logs
            .write()
            .map_err(|_| anyhow!("log table poisoned"))?;
        if logs.len() <= slot {
            logs.resize(slot + 1, None);
        }
        if let Some(id) = logs[slot] {
            return Ok(id);
        }
        let name = format!("log-{log}");
        let id = match self.store.open_log(&name) {
            Some(id) => id,
            None => self.store.create_log(&name)?,
        };
        logs[slot] = Some(id);
        Ok(id)
    }

    fn key_value() -> anyhow::Error {
        anyhow!("the logstore engine runs logappend only; it stores no keys")
    }
}

impl Engine for LogStoreEngine {
    fn name(&self) -> &'static str {
        "logstore"
    }

    fn put(&self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Err(Self::key_value())
    }

    fn get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Err(Self::key_value())
    }

    fn write_batch(&self, _entries: &[(&[u8], &[u8])]) -> Result<()> {
        Err(Self::key_value())
    }

    fn merge(&self, _key: &[u8], _operand: &[u8]) -> Result<()> {
        Err(Self::key_value())
    }

    fn scan(&self, _start: &[u8], _nexts: u64) -> Result<ScanOutcome> {
        Err(Self::key_value())
    }

    /// Nothing is buffered in memory: appends are written when they return.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact_all(&self) -> Result<()> {
        bail!("the logstore engine has nothing to compact")
    }

    fn wait_for_compactions(&self) -> Result<()> {
        Ok(())
    }

    fn stats_text(&self) -> Option<String> {
        Some(format!("{:#?}", self.store.stats()))
    }

    fn counters(&self) -> Option<EngineCounters> {
        None
    }

    fn log_append(&self, log: u32, lsn: u64, record: &[u8]) -> Result<()> {
        let id = self.log(log)?;
        self.store.append(id, lsn, record)?;
        Ok(())
    }

    fn log_trim(&self, log: u32, _from: u64, before: u64) -> Result<()> {
        let id = self.log(log)?;
        self.store.trim(id, before)?;
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.store.sync()?;
        Ok(())
    }
}
