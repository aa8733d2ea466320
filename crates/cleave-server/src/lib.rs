//! cleave-server: cleave behind the Redis protocol (RESP2 and RESP3), so
//! that redis-cli, redis-benchmark, YCSB and any Redis client library work
//! against it. Redis types map onto cleave's keys as kvrocks maps them onto
//! RocksDB's (docs/format/server.md).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "server")]
pub mod cluster;
#[cfg(feature = "server")]
pub mod cluster_cli;
#[cfg(feature = "server")]
pub mod commands;
#[cfg(feature = "server")]
pub mod config;
#[cfg(feature = "server")]
mod connection;
#[cfg(feature = "server")]
pub mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod keyspace;
#[cfg(feature = "server")]
pub mod pipeline;
#[cfg(feature = "server")]
pub mod pubsub;
pub mod resp;
#[cfg(feature = "server")]
mod serve;
pub mod small_file;
#[cfg(feature = "server")]
pub mod state;
#[cfg(feature = "server")]
pub mod store;
#[cfg(feature = "server")]
pub mod subkey_filter;
#[cfg(feature = "server")]
pub mod txn;

#[cfg(feature = "server")]
pub use serve::run;
