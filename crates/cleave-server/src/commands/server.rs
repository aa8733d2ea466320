//! Connection and server commands: PING, ECHO, SELECT, QUIT, HELLO, INFO,
//! CONFIG, COMMAND, CLIENT, SHUTDOWN.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::{all, is, lookup, parse_i64, Command, Ctx};
use crate::error::CmdError;
use crate::glob;
use crate::keyspace::{self, META};
use crate::resp::Reply;
use crate::store::FsyncMode;
use cleave::WriteState;

type Result = std::result::Result<Reply, CmdError>;

/// The Redis version clients are told: the commands here behave as 7.0's.
pub const REDIS_VERSION: &str = "7.0.0";

pub fn ping(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    // A RESP2 connection in subscribed mode gets PING's answer as a
    // message-like array, as Redis sends it.
    if ctx.client.in_resp2_subscribed_mode() {
        let msg = args.get(1).cloned().unwrap_or_default();
        return Ok(Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(msg)]));
    }
    match args {
        [_] => Ok(Reply::Status("PONG")),
        [_, msg] => Ok(Reply::Bulk(msg.clone())),
        _ => Err(CmdError::err(
            "wrong number of arguments for 'ping' command",
        )),
    }
}

pub fn echo(_: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    Ok(Reply::Bulk(args[1].clone()))
}

pub fn select(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    ctx.client.db = super::keys::db_index(&args[1])?;
    if let Some(info) = ctx.shared.clients.lock().get_mut(&ctx.client.id) {
        info.db = ctx.client.db;
    }
    Ok(Reply::ok())
}

/// INFO keyspace's line names, one per database.
const DB_NAMES: [&str; super::keys::DATABASES as usize] = [
    "db0", "db1", "db2", "db3", "db4", "db5", "db6", "db7", "db8", "db9", "db10", "db11", "db12",
    "db13", "db14", "db15",
];

/// Redis's answer to a cluster command on a server without cluster mode.
const NO_CLUSTER: &str = "ERR This instance has cluster support disabled";

pub fn cluster(_: &mut Ctx<'_>, _: &[Vec<u8>]) -> Result {
    Err(CmdError::err(&NO_CLUSTER[4..]))
}

/// READONLY: this connection's reads on a follower are served from the
/// follower's own state.
pub fn readonly(ctx: &mut Ctx<'_>, _: &[Vec<u8>]) -> Result {
    if ctx.shared.cluster.get().is_none() {
        return Err(CmdError::err(&NO_CLUSTER[4..]));
    }
    ctx.client.readonly = true;
    Ok(Reply::ok())
}

/// READWRITE: back to linearizable reads (the default).
pub fn readwrite(ctx: &mut Ctx<'_>, _: &[Vec<u8>]) -> Result {
    if ctx.shared.cluster.get().is_none() {
        return Err(CmdError::err(&NO_CLUSTER[4..]));
    }
    ctx.client.readonly = false;
    Ok(Reply::ok())
}

pub fn quit(ctx: &mut Ctx<'_>, _: &[Vec<u8>]) -> Result {
    ctx.client.close = true;
    Ok(Reply::ok())
}

pub fn hello(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let proto = parse_i64(v)
            .ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if proto != 2 && proto != 3 {
            return Err(CmdError::Reply(
                "NOPROTO unsupported protocol version".to_string(),
            ));
        }
        ctx.client.proto = proto as u8;
        i = 2;
    }
    while i < args.len() {
        if is(&args[i], "auth") && i + 2 < args.len() {
            // No password is set: as Redis's default user, any is taken.
            i += 3;
        } else if is(&args[i], "setname") && i + 1 < args.len() {
            set_name(ctx, &args[i + 1])?;
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                args[i].escape_ascii()
            )));
        }
    }
    let text = |s: &str| Reply::bulk(s);
    Ok(Reply::Map(vec![
        (text("server"), text("redis")),
        (text("version"), text(REDIS_VERSION)),
        (text("proto"), Reply::Int(i64::from(ctx.client.proto))),
        (text("id"), Reply::Int(ctx.client.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ]))
}

fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) -> std::result::Result<(), CmdError> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    ctx.client.name = name.to_vec();
    if let Some(info) = ctx.shared.clients.lock().get_mut(&ctx.client.id) {
        info.name = name.to_vec();
    }
    Ok(())
}

pub fn client(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let sub = &args[1];
    match &args[2..] {
        [name] if is(sub, "setname") => set_name(ctx, name).map(|()| Reply::ok()),
        [] if is(sub, "getname") => Ok(if ctx.client.name.is_empty() {
            Reply::Nil
        } else {
            Reply::Bulk(ctx.client.name.clone())
        }),
        [] if is(sub, "id") => Ok(Reply::Int(ctx.client.id as i64)),
        // Library name and version, which redis-py sends on connecting.
        [attr, _] if is(sub, "setinfo") && (is(attr, "lib-name") || is(attr, "lib-ver")) => {
            Ok(Reply::ok())
        }
        [] if is(sub, "list") => {
            let clients = ctx.shared.clients.lock();
            let mut out = String::new();
            for (id, c) in clients.iter() {
                let _ = writeln!(
                    out,
                    "id={id} addr={} name={} age={} db={}",
                    c.addr,
                    String::from_utf8_lossy(&c.name),
                    c.connected.elapsed().as_secs(),
                    c.db
                );
            }
            Ok(Reply::Verbatim(out))
        }
        [] if is(sub, "info") => Ok(Reply::Verbatim(format!(
            "id={} addr={} name={} db={}\n",
            ctx.client.id,
            ctx.client.addr,
            String::from_utf8_lossy(&ctx.client.name),
            ctx.client.db
        ))),
        _ => Err(unknown_subcommand(sub, "CLIENT")),
    }
}

fn unknown_subcommand(sub: &[u8], cmd: &str) -> CmdError {
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        sub.escape_ascii()
    ))
}

pub fn shutdown(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    for a in &args[1..] {
        if is(a, "abort") {
            return Err(CmdError::err("No shutdown in progress."));
        }
        if !["nosave", "save", "now", "force"].iter().any(|w| is(a, w)) {
            return Err(CmdError::Syntax);
        }
    }
    // The connection closes without a reply, as Redis's does; main then
    // syncs and closes the database.
    ctx.client.close = true;
    ctx.client.silent = true;
    ctx.shared.request_shutdown();
    Ok(Reply::ok())
}

/// Parses a size as Redis's configuration does: bytes, or with `k`, `kb`,
/// `m`, `mb`, `g`, `gb` (the `b` forms in 1024s, the others in 1000s).
fn parse_memory(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.to_ascii_lowercase();
    let units: [(&str, u64); 6] = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
    ];
    for (suffix, unit) in units {
        if let Some(n) = s.strip_suffix(suffix) {
            return n.parse::<u64>().ok()?.checked_mul(unit);
        }
    }
    s.parse().ok()
}

/// Every parameter CONFIG GET knows, with its value.
fn parameters(ctx: &Ctx<'_>) -> Vec<(String, String)> {
    let shared = ctx.shared;
    let limits = shared.limits.read().clone();
    let fixed = &shared.fixed;
    let mut p: Vec<(String, String)> = vec![
        ("bind".into(), fixed.bind.clone()),
        ("port".into(), fixed.port.to_string()),
        ("dir".into(), fixed.dir.clone()),
        ("appendonly".into(), "yes".into()),
        (
            "appendfsync".into(),
            shared.store.fsync_mode().name().into(),
        ),
        ("save".into(), String::new()),
        ("databases".into(), "1".into()),
        ("maxmemory".into(), "0".into()),
        ("maxclients".into(), limits.max_clients.to_string()),
        (
            "proto-max-bulk-len".into(),
            limits.proto_max_bulk_len.to_string(),
        ),
        (
            "client-query-buffer-limit".into(),
            limits.query_buffer_limit.to_string(),
        ),
    ];
    p.extend(fixed.engine.iter().map(|(k, v)| (k.to_string(), v.clone())));
    p
}

pub fn config(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let sub = &args[1];
    if is(sub, "get") && args.len() >= 3 {
        let params = parameters(ctx);
        let mut out = Vec::new();
        for (name, value) in &params {
            if args[2..]
                .iter()
                .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
            {
                out.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        return Ok(Reply::Map(out));
    }
    if is(sub, "set") && args.len() >= 4 && args.len().is_multiple_of(2) {
        // Checked whole before any is applied, as Redis 7 does.
        let known = parameters(ctx);
        let mut changes = Vec::new();
        for pair in args[2..].chunks_exact(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            let failed = |why: &str| {
                CmdError::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - {why}"
                ))
            };
            let change = match name.as_str() {
                "appendfsync" => Change::Fsync(
                    FsyncMode::parse(&String::from_utf8_lossy(&pair[1])).ok_or_else(|| {
                        failed("argument(s) must be one of the following: always, everysec, no")
                    })?,
                ),
                "maxclients" => Change::MaxClients(
                    parse_i64(&pair[1])
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| failed("argument couldn't be parsed into an integer"))?
                        as usize,
                ),
                "proto-max-bulk-len" => Change::MaxBulk(
                    parse_memory(&pair[1])
                        .filter(|&n| n >= 1 << 20)
                        .ok_or_else(|| failed("argument must be a memory value of at least 1mb"))?,
                ),
                "client-query-buffer-limit" => Change::QueryBuffer(
                    parse_memory(&pair[1])
                        .filter(|&n| n >= 1 << 20)
                        .ok_or_else(|| failed("argument must be a memory value of at least 1mb"))?
                        as usize,
                ),
                _ if known.iter().any(|(k, _)| *k == name) => {
                    return Err(failed("can't set immutable config"))
                }
                _ => {
                    return Err(CmdError::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{name}'"
                    )))
                }
            };
            changes.push(change);
        }
        let limits = &ctx.shared.limits;
        for change in changes {
            match change {
                // Not under the limits' lock, which every connection
                // reads: a switch to `always` syncs the WAL first.
                Change::Fsync(mode) => ctx.shared.store.set_fsync_mode(mode)?,
                Change::MaxClients(n) => limits.write().max_clients = n,
                Change::MaxBulk(n) => limits.write().proto_max_bulk_len = n,
                Change::QueryBuffer(n) => limits.write().query_buffer_limit = n,
            }
        }
        return Ok(Reply::ok());
    }
    if is(sub, "resetstat") && args.len() == 2 {
        let s = &ctx.shared.stats;
        for c in [
            &s.commands,
            &s.hits,
            &s.misses,
            &s.rejected,
            &s.connections,
            &s.input_bytes,
            &s.output_bytes,
            &s.protocol_errors,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        return Ok(Reply::ok());
    }
    if is(sub, "rewrite") && args.len() == 2 {
        return Err(CmdError::err("The server is running without a config file"));
    }
    Err(unknown_subcommand(sub, "CONFIG"))
}

enum Change {
    Fsync(FsyncMode),
    MaxClients(usize),
    MaxBulk(u64),
    QueryBuffer(usize),
}

/// A command as `COMMAND INFO` gives it (Redis 7's ten fields).
fn command_info(c: &Command) -> Reply {
    Reply::Array(vec![
        Reply::bulk(c.name),
        Reply::Int(i64::from(c.arity)),
        Reply::Set(c.flags.iter().map(|f| Reply::Status(f)).collect()),
        Reply::Int(i64::from(c.first_key)),
        Reply::Int(i64::from(c.last_key)),
        Reply::Int(i64::from(c.step)),
        Reply::Set(Vec::new()),
        Reply::Set(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

pub fn command(_: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(all().iter().map(command_info).collect()));
    };
    if is(sub, "count") && args.len() == 2 {
        return Ok(Reply::Int(all().len() as i64));
    }
    if is(sub, "info") {
        let names = &args[2..];
        if names.is_empty() {
            return Ok(Reply::Array(all().iter().map(command_info).collect()));
        }
        return Ok(Reply::Array(
            names
                .iter()
                .map(|n| lookup(n).map_or(Reply::NilArray, command_info))
                .collect(),
        ));
    }
    if is(sub, "docs") {
        // No documentation is served: redis-cli then uses its own hints.
        return Ok(Reply::Map(Vec::new()));
    }
    if is(sub, "list") && args.len() == 2 {
        return Ok(Reply::Array(
            all().iter().map(|c| Reply::bulk(c.name)).collect(),
        ));
    }
    Err(unknown_subcommand(sub, "COMMAND"))
}

/// Resident and peak resident memory of this process, in bytes, from
/// /proc (0 where it is unavailable).
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes}B"),
        1024..1_048_576 => format!("{:.2}K", b / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.2}M", b / 1_048_576.0),
        _ => format!("{:.2}G", b / 1_073_741_824.0),
    }
}

const SECTIONS: [&str; 9] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cluster",
    "keyspace",
    "cleave",
];

pub fn info(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let everything = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| w == "all" || w == "everything" || w == "default");
    let mut out = String::new();
    for section in SECTIONS {
        if !everything && !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        info_section(ctx, section, &mut out)?;
    }
    Ok(Reply::Verbatim(out))
}

fn info_section(
    ctx: &Ctx<'_>,
    section: &str,
    out: &mut String,
) -> std::result::Result<(), CmdError> {
    let shared = ctx.shared;
    let counter = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed).to_string();
    let mut l: Vec<(&str, String)> = Vec::new();
    let title = match section {
        "server" => {
            let uptime = shared.started.elapsed().as_secs();
            l.push(("redis_version", REDIS_VERSION.into()));
            l.push(("cleave_version", env!("CARGO_PKG_VERSION").into()));
            let mode = if shared.cluster.get().is_some() {
                "cluster"
            } else {
                "standalone"
            };
            l.push(("redis_mode", mode.into()));
            l.push(("arch_bits", usize::BITS.to_string()));
            l.push(("multiplexing_api", "tokio".into()));
            l.push(("process_id", std::process::id().to_string()));
            l.push(("tcp_port", shared.fixed.port.to_string()));
            l.push(("uptime_in_seconds", uptime.to_string()));
            l.push(("uptime_in_days", (uptime / 86400).to_string()));
            "Server"
        }
        "clients" => {
            l.push(("connected_clients", shared.clients.lock().len().to_string()));
            l.push(("maxclients", shared.limits.read().max_clients.to_string()));
            l.push(("blocked_clients", "0".into()));
            "Clients"
        }
        "memory" => {
            let (rss, peak) = memory();
            // No allocator of the server's own counts its memory: the
            // resident size is what it uses.
            l.push(("used_memory", rss.to_string()));
            l.push(("used_memory_human", human(rss)));
            l.push(("used_memory_rss", rss.to_string()));
            l.push(("used_memory_rss_human", human(rss)));
            l.push(("used_memory_peak", peak.to_string()));
            l.push(("used_memory_peak_human", human(peak)));
            let stats = shared.store.db().stats();
            l.push(("cleave_memtable_bytes", stats.memtable_bytes.to_string()));
            l.push((
                "cleave_block_cache_bytes",
                stats.block_cache_usage.to_string(),
            ));
            l.push(("maxmemory", "0".into()));
            l.push(("maxmemory_policy", "noeviction".into()));
            "Memory"
        }
        "persistence" => {
            let db = shared.store.db();
            let stats = db.stats();
            // Redis's own fields, as its AOF would set them: a full disk
            // fails writes, and the last write's status says so.
            let (state, reason) = match &stats.write_state {
                WriteState::ReadWrite => ("read-write", "none"),
                WriteState::NoSpace { .. } => ("read-only", "no_space"),
                WriteState::Poisoned { .. } => ("read-only", "poisoned"),
                _ => ("read-only", "opened_read_only"),
            };
            l.push(("loading", "0".into()));
            l.push(("aof_enabled", "1".into()));
            let status = if state == "read-write" { "ok" } else { "err" };
            l.push(("aof_last_write_status", status.into()));
            l.push(("cleave_write_state", state.into()));
            l.push(("cleave_write_state_reason", reason.into()));
            let free = stats.fs_free_bytes.map_or(-1, |b| b as i64);
            l.push(("cleave_fs_free_bytes", free.to_string()));
            l.push(("cleave_no_space_stops", stats.no_space_stops.to_string()));
            l.push(("cleave_resumes", stats.resumes.to_string()));
            "Persistence"
        }
        "stats" => {
            let s = &shared.stats;
            l.push(("total_connections_received", counter(&s.connections)));
            l.push(("total_commands_processed", counter(&s.commands)));
            l.push(("total_net_input_bytes", counter(&s.input_bytes)));
            l.push(("total_net_output_bytes", counter(&s.output_bytes)));
            l.push(("rejected_connections", counter(&s.rejected)));
            l.push(("keyspace_hits", counter(&s.hits)));
            l.push(("keyspace_misses", counter(&s.misses)));
            l.push(("protocol_errors", counter(&s.protocol_errors)));
            "Stats"
        }
        "replication" => {
            match shared.cluster.get() {
                Some(cluster) => {
                    let role = crate::cluster::role(cluster);
                    l.push(("role", role.into()));
                    if role == "slave" {
                        if let Some((_, leader)) = cluster.leader() {
                            let (host, port) = crate::cluster::host_port(&leader.redis);
                            l.push(("master_host", host));
                            l.push(("master_port", port.to_string()));
                            l.push(("master_link_status", "up".into()));
                        } else {
                            l.push(("master_link_status", "down".into()));
                        }
                    } else {
                        let members = cluster
                            .raft
                            .metrics()
                            .borrow()
                            .membership_config
                            .nodes()
                            .count();
                        l.push(("connected_slaves", members.saturating_sub(1).to_string()));
                    }
                }
                None => {
                    l.push(("role", "master".into()));
                    l.push(("connected_slaves", "0".into()));
                }
            }
            "Replication"
        }
        "cluster" => {
            match shared.cluster.get() {
                Some(cluster) => {
                    l.push(("cluster_enabled", "1".into()));
                    l.extend(
                        crate::cluster::info_fields(cluster)
                            .into_iter()
                            .filter(|(k, _)| k.starts_with("raft_")),
                    );
                }
                None => l.push(("cluster_enabled", "0".into())),
            }
            "Cluster"
        }
        "keyspace" => {
            let db = shared.store.db();
            for n in 0..super::keys::DATABASES {
                let (begin, end) = keyspace::range(META, n);
                let keys = super::keys::count_keys(&shared.store, n)?;
                // Estimates both, from the engine's counts: an expired key
                // counts in `keys` until compaction drops it.
                let expires = db.estimate_num_expiring(&begin, &end).min(keys);
                if keys > 0 {
                    l.push((
                        DB_NAMES[n as usize],
                        format!("keys={keys},expires={expires},avg_ttl=0"),
                    ));
                }
            }
            "Keyspace"
        }
        _ => {
            let db = shared.store.db();
            let s = db.stats();
            let space = db.space_report()?;
            l.push(("appendfsync", shared.store.fsync_mode().name().into()));
            l.push(("user_writes", s.user_writes.to_string()));
            l.push(("user_bytes_written", s.user_bytes_written.to_string()));
            l.push(("wal_bytes_written", s.wal_bytes_written.to_string()));
            l.push(("wal_syncs", s.wal_syncs.to_string()));
            l.push(("flush_bytes_written", s.flush_bytes_written.to_string()));
            l.push((
                "compaction_bytes_written",
                s.compaction_bytes_written.to_string(),
            ));
            l.push((
                "value_file_bytes_written",
                s.value_file_bytes_written.to_string(),
            ));
            l.push((
                "value_log_bytes_written",
                s.value_log_bytes_written.to_string(),
            ));
            l.push((
                "write_amplification",
                format!("{:.2}", s.write_amplification()),
            ));
            l.push(("gets", s.gets.to_string()));
            l.push(("get_disk_reads", s.get_disk_reads.to_string()));
            l.push(("block_cache_hits", s.block_cache_hits.to_string()));
            l.push(("block_cache_misses", s.block_cache_misses.to_string()));
            l.push(("prefix_filter_checked", s.prefix_filter_checked.to_string()));
            l.push(("prefix_filter_useful", s.prefix_filter_useful.to_string()));
            l.push(("expired_entries", s.expired_entries.to_string()));
            l.push(("expired_value_bytes", s.expired_value_bytes.to_string()));
            let sub = shared.store.subkey_stats();
            let n = |c: &std::sync::atomic::AtomicU64| {
                c.load(std::sync::atomic::Ordering::Relaxed).to_string()
            };
            l.push(("stale_subkeys_checked", n(&sub.checked)));
            l.push(("stale_subkeys_removed", n(&sub.removed)));
            l.push(("stale_subkeys_decided_from_key", n(&sub.decided_from_key)));
            l.push(("stale_subkeys_lookups", n(&sub.lookups)));
            let files: Vec<String> = s.levels.iter().map(|l| l.files.to_string()).collect();
            l.push(("files_per_level", files.join(",")));
            l.push(("stall_micros", s.stall_micros.to_string()));
            l.push(("immutable_memtables", s.immutable_memtables.to_string()));
            l.push(("space_bytes", db.space().to_string()));
            l.push(("space_budget_bytes", s.space_budget_bytes.to_string()));
            l.push(("sstable_bytes", space.sstable_bytes.to_string()));
            l.push(("value_files", space.value_files.to_string()));
            l.push(("value_file_bytes", space.value_file_bytes.to_string()));
            l.push((
                "referenced_value_bytes",
                space.referenced_value_bytes.to_string(),
            ));
            l.push((
                "exposed_garbage_bytes",
                space.exposed_garbage_bytes.to_string(),
            ));
            l.push((
                "exposed_garbage_ratio",
                format!("{:.4}", space.exposed_garbage_ratio),
            ));
            l.push(("wal_bytes", space.wal_bytes.to_string()));
            l.push(("manifest_bytes", space.manifest_bytes.to_string()));
            let errors = db.property("cleave.background-errors").unwrap_or_default();
            l.push(("background_errors", errors));
            "Cleave"
        }
    };
    let _ = write!(out, "# {title}\r\n");
    for (k, v) in l {
        let _ = write!(out, "{k}:{v}\r\n");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn memory_values_take_redis_units() {
        assert_eq!(parse_memory(b"512mb"), Some(512 << 20));
        assert_eq!(parse_memory(b"1GB"), Some(1 << 30));
        assert_eq!(parse_memory(b"2k"), Some(2000));
        assert_eq!(parse_memory(b"123"), Some(123));
        assert_eq!(parse_memory(b"x"), None);
        assert_eq!(parse_memory(b"99999999999999999gb"), None);
    }
}
