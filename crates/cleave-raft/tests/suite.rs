//! openraft's storage test suite, each of its cases on a fresh directory.

mod common;

use cleave_raft::{LogStorage, StateMachine, StorageError, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStorage, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStorage, StateMachine), StorageError> {
        let dir = tempfile::tempdir().map_err(|e| openraft::StorageIOError::write(&e))?;
        let (log, sm) = cleave_raft::open(dir.path(), common::log_options(), common::db_options())?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("suite failed: {e}");
    }
}
