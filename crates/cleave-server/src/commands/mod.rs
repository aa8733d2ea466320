//! The command table and dispatch: arity, key positions and flags as
//! Redis's `COMMAND` reports them, and the handler of each command.

mod bits;
pub mod expiry;
mod hashes;
mod keys;
mod lists;
mod multi;
mod pubsub;
mod server;
mod sets;
mod strings;
mod zsets;

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use crate::error::CmdError;
use crate::resp::Reply;
use crate::state::{Client, Shared};

/// What a handler sees: the server and the calling connection.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub client: &'a mut Client,
}

type Handler = fn(&mut Ctx<'_>, &[Vec<u8>]) -> Result<Reply, CmdError>;

/// One command, as `COMMAND INFO` describes it.
pub struct Command {
    pub name: &'static str,
    /// Arguments with the name; negative: at least that many.
    pub arity: i32,
    pub flags: &'static [&'static str],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    handler: Handler,
    /// Needs the database alone (FLUSHDB): no other command runs meanwhile.
    exclusive: bool,
    /// May run long (walks a range, or the whole database): run on a
    /// blocking thread, not on a thread serving connections.
    pub slow: bool,
    /// `flags` has "write", "readonly", "blocking": asked of every request.
    write: bool,
    read: bool,
    blocking: bool,
}

/// Whether `flags` has `flag`; at compile time, for the command table.
const fn has_flag(flags: &[&str], flag: &str) -> bool {
    let mut i = 0;
    while i < flags.len() {
        let (a, b) = (flags[i].as_bytes(), flag.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return true;
            }
        }
        i += 1;
    }
    false
}

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const WD: &[&str] = &["write"];
const WB: &[&str] = &["write", "blocking"];
const R: &[&str] = &["readonly"];
const RF: &[&str] = &["readonly", "fast"];
const S: &[&str] = &["fast", "stale", "loading"];
const A: &[&str] = &["admin", "noscript", "loading", "stale"];
const T: &[&str] = &["noscript", "loading", "stale", "fast"];
const P: &[&str] = &["pubsub", "loading", "stale", "fast"];

macro_rules! cmd {
    ($name:expr, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $handler:path) => {
        Command {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            handler: $handler,
            exclusive: false,
            slow: false,
            write: has_flag($flags, "write"),
            read: has_flag($flags, "readonly"),
            blocking: has_flag($flags, "blocking"),
        }
    };
}

/// Every command, in the order `COMMAND` lists them.
static COMMANDS: &[Command] = &[
    // Strings.
    cmd!("get", 2, RF, 1, 1, 1, strings::get),
    cmd!("set", -3, W, 1, 1, 1, strings::set),
    cmd!("getdel", 2, WF, 1, 1, 1, strings::getdel),
    cmd!("mget", -2, RF, 1, -1, 1, strings::mget),
    cmd!("mset", -3, W, 1, -1, 2, strings::mset),
    cmd!("msetnx", -3, W, 1, -1, 2, strings::msetnx),
    cmd!("strlen", 2, RF, 1, 1, 1, strings::strlen),
    cmd!("getrange", 4, R, 1, 1, 1, strings::getrange),
    cmd!("setrange", 4, W, 1, 1, 1, strings::setrange),
    cmd!("append", 3, W, 1, 1, 1, strings::append),
    cmd!("incr", 2, WF, 1, 1, 1, strings::incr),
    cmd!("incrby", 3, WF, 1, 1, 1, strings::incrby),
    cmd!("decr", 2, WF, 1, 1, 1, strings::decr),
    cmd!("decrby", 3, WF, 1, 1, 1, strings::decrby),
    cmd!("setex", 4, W, 1, 1, 1, strings::setex),
    cmd!("psetex", 4, W, 1, 1, 1, strings::psetex),
    cmd!("getex", -2, WF, 1, 1, 1, strings::getex),
    cmd!("setnx", 3, WF, 1, 1, 1, strings::setnx),
    cmd!("getset", 3, WF, 1, 1, 1, strings::getset),
    cmd!("incrbyfloat", 3, WF, 1, 1, 1, strings::incrbyfloat),
    cmd!("lcs", -3, R, 1, 2, 1, strings::lcs),
    cmd!("setbit", 4, W, 1, 1, 1, bits::setbit),
    cmd!("getbit", 3, RF, 1, 1, 1, bits::getbit),
    cmd!("bitcount", -2, R, 1, 1, 1, bits::bitcount),
    cmd!("bitpos", -3, R, 1, 1, 1, bits::bitpos),
    cmd!("bitop", -4, W, 2, -1, 1, bits::bitop),
    // Hashes.
    cmd!("hset", -4, WF, 1, 1, 1, hashes::hset),
    cmd!("hmset", -4, WF, 1, 1, 1, hashes::hmset),
    cmd!("hget", 3, RF, 1, 1, 1, hashes::hget),
    cmd!("hmget", -3, RF, 1, 1, 1, hashes::hmget),
    cmd!("hgetall", 2, R, 1, 1, 1, hashes::hgetall),
    cmd!("hdel", -3, WF, 1, 1, 1, hashes::hdel),
    cmd!("hexists", 3, RF, 1, 1, 1, hashes::hexists),
    cmd!("hlen", 2, RF, 1, 1, 1, hashes::hlen),
    cmd!("hsetnx", 4, WF, 1, 1, 1, hashes::hsetnx),
    cmd!("hincrby", 4, WF, 1, 1, 1, hashes::hincrby),
    cmd!("hincrbyfloat", 4, WF, 1, 1, 1, hashes::hincrbyfloat),
    cmd!("hkeys", 2, R, 1, 1, 1, hashes::hkeys),
    cmd!("hvals", 2, R, 1, 1, 1, hashes::hvals),
    cmd!("hstrlen", 3, RF, 1, 1, 1, hashes::hstrlen),
    cmd!("hrandfield", -2, R, 1, 1, 1, hashes::hrandfield),
    cmd!("hscan", -3, R, 1, 1, 1, hashes::hscan),
    // Lists.
    cmd!("lpush", -3, WF, 1, 1, 1, lists::lpush),
    cmd!("rpush", -3, WF, 1, 1, 1, lists::rpush),
    cmd!("lpushx", -3, WF, 1, 1, 1, lists::lpushx),
    cmd!("rpushx", -3, WF, 1, 1, 1, lists::rpushx),
    cmd!("lpop", -2, WF, 1, 1, 1, lists::lpop),
    cmd!("rpop", -2, WF, 1, 1, 1, lists::rpop),
    cmd!("llen", 2, RF, 1, 1, 1, lists::llen),
    cmd!("lindex", 3, R, 1, 1, 1, lists::lindex),
    cmd!("lrange", 4, R, 1, 1, 1, lists::lrange),
    cmd!("lset", 4, W, 1, 1, 1, lists::lset),
    cmd!("ltrim", 4, WD, 1, 1, 1, lists::ltrim),
    cmd!("lrem", 4, WD, 1, 1, 1, lists::lrem),
    cmd!("linsert", 5, W, 1, 1, 1, lists::linsert),
    cmd!("lpos", -3, R, 1, 1, 1, lists::lpos),
    cmd!("lmove", 5, W, 1, 2, 1, lists::lmove),
    cmd!("rpoplpush", 3, W, 1, 2, 1, lists::rpoplpush),
    cmd!("blpop", -3, WB, 1, -2, 1, lists::blpop),
    cmd!("brpop", -3, WB, 1, -2, 1, lists::brpop),
    cmd!("blmove", 6, WB, 1, 2, 1, lists::blmove),
    cmd!("brpoplpush", 4, WB, 1, 2, 1, lists::brpoplpush),
    // Sets.
    cmd!("sadd", -3, WF, 1, 1, 1, sets::sadd),
    cmd!("srem", -3, WF, 1, 1, 1, sets::srem),
    cmd!("smembers", 2, R, 1, 1, 1, sets::smembers),
    cmd!("sismember", 3, RF, 1, 1, 1, sets::sismember),
    cmd!("smismember", -3, RF, 1, 1, 1, sets::smismember),
    cmd!("scard", 2, RF, 1, 1, 1, sets::scard),
    cmd!("spop", -2, WF, 1, 1, 1, sets::spop),
    cmd!("srandmember", -2, R, 1, 1, 1, sets::srandmember),
    cmd!("smove", 4, WF, 1, 2, 1, sets::smove),
    cmd!("sinter", -2, R, 1, -1, 1, sets::sinter),
    cmd!("sunion", -2, R, 1, -1, 1, sets::sunion),
    cmd!("sdiff", -2, R, 1, -1, 1, sets::sdiff),
    cmd!("sinterstore", -3, W, 1, -1, 1, sets::sinterstore),
    cmd!("sunionstore", -3, W, 1, -1, 1, sets::sunionstore),
    cmd!("sdiffstore", -3, W, 1, -1, 1, sets::sdiffstore),
    cmd!("sintercard", -3, R, 0, 0, 0, sets::sintercard),
    cmd!("sscan", -3, R, 1, 1, 1, sets::sscan),
    // Sorted sets.
    cmd!("zadd", -4, WF, 1, 1, 1, zsets::zadd),
    cmd!("zpopmin", -2, WF, 1, 1, 1, zsets::zpopmin),
    cmd!("zpopmax", -2, WF, 1, 1, 1, zsets::zpopmax),
    cmd!("zrem", -3, WF, 1, 1, 1, zsets::zrem),
    cmd!("zscore", 3, RF, 1, 1, 1, zsets::zscore),
    cmd!("zcard", 2, RF, 1, 1, 1, zsets::zcard),
    cmd!("zrange", -4, R, 1, 1, 1, zsets::zrange),
    cmd!("zrevrange", -4, R, 1, 1, 1, zsets::zrevrange),
    cmd!("zrangebyscore", -4, R, 1, 1, 1, zsets::zrangebyscore),
    cmd!("zrevrangebyscore", -4, R, 1, 1, 1, zsets::zrevrangebyscore),
    cmd!("zrangebylex", -4, R, 1, 1, 1, zsets::zrangebylex),
    cmd!("zrevrangebylex", -4, R, 1, 1, 1, zsets::zrevrangebylex),
    cmd!("zcount", 4, RF, 1, 1, 1, zsets::zcount),
    cmd!("zlexcount", 4, RF, 1, 1, 1, zsets::zlexcount),
    cmd!("zincrby", 4, WF, 1, 1, 1, zsets::zincrby),
    cmd!("zmscore", -3, RF, 1, 1, 1, zsets::zmscore),
    cmd!("zrank", -3, RF, 1, 1, 1, zsets::zrank),
    cmd!("zrevrank", -3, RF, 1, 1, 1, zsets::zrevrank),
    cmd!("zremrangebyscore", 4, W, 1, 1, 1, zsets::zremrangebyscore),
    cmd!("zremrangebyrank", 4, W, 1, 1, 1, zsets::zremrangebyrank),
    cmd!("zremrangebylex", 4, W, 1, 1, 1, zsets::zremrangebylex),
    cmd!("zscan", -3, R, 1, 1, 1, zsets::zscan),
    // Keys.
    cmd!("del", -2, WD, 1, -1, 1, keys::del),
    cmd!("unlink", -2, WF, 1, -1, 1, keys::unlink),
    cmd!("touch", -2, RF, 1, -1, 1, keys::touch),
    cmd!("rename", 3, WD, 1, 2, 1, keys::rename),
    cmd!("renamenx", 3, WF, 1, 2, 1, keys::renamenx),
    cmd!("copy", -3, W, 1, 2, 1, keys::copy),
    cmd!("randomkey", 1, R, 0, 0, 0, keys::randomkey),
    Command {
        slow: true,
        ..cmd!("keys", 2, R, 0, 0, 0, keys::keys_)
    },
    cmd!("object", -2, R, 2, 2, 1, keys::object),
    cmd!("exists", -2, RF, 1, -1, 1, keys::exists),
    cmd!("type", 2, RF, 1, 1, 1, keys::type_),
    cmd!("expire", -3, WF, 1, 1, 1, expiry::expire_),
    cmd!("pexpire", -3, WF, 1, 1, 1, expiry::pexpire),
    cmd!("expireat", -3, WF, 1, 1, 1, expiry::expireat),
    cmd!("pexpireat", -3, WF, 1, 1, 1, expiry::pexpireat),
    cmd!("ttl", 2, RF, 1, 1, 1, expiry::ttl),
    cmd!("pttl", 2, RF, 1, 1, 1, expiry::pttl),
    cmd!("expiretime", 2, RF, 1, 1, 1, expiry::expiretime),
    cmd!("pexpiretime", 2, RF, 1, 1, 1, expiry::pexpiretime),
    cmd!("persist", 2, WF, 1, 1, 1, expiry::persist),
    Command {
        slow: true,
        ..cmd!("scan", -2, R, 0, 0, 0, keys::scan)
    },
    cmd!("dbsize", 1, RF, 0, 0, 0, keys::dbsize),
    Command {
        exclusive: true,
        slow: true,
        ..cmd!("flushdb", -1, WD, 0, 0, 0, keys::flushdb)
    },
    Command {
        exclusive: true,
        slow: true,
        ..cmd!("flushall", -1, WD, 0, 0, 0, keys::flushall)
    },
    // Transactions.
    cmd!("multi", 1, T, 0, 0, 0, multi::multi),
    Command {
        exclusive: true,
        slow: true,
        ..cmd!(
            "exec",
            1,
            &["noscript", "loading", "stale"],
            0,
            0,
            0,
            multi::exec
        )
    },
    cmd!("discard", 1, T, 0, 0, 0, multi::discard),
    cmd!("watch", -2, T, 1, -1, 1, multi::watch),
    cmd!("unwatch", 1, T, 0, 0, 0, multi::unwatch),
    // Pub/Sub.
    cmd!("subscribe", -2, P, 0, 0, 0, pubsub::subscribe),
    cmd!("psubscribe", -2, P, 0, 0, 0, pubsub::psubscribe),
    cmd!("unsubscribe", -1, P, 0, 0, 0, pubsub::unsubscribe),
    cmd!("punsubscribe", -1, P, 0, 0, 0, pubsub::punsubscribe),
    cmd!("publish", 3, P, 0, 0, 0, pubsub::publish),
    cmd!("pubsub", -2, P, 0, 0, 0, pubsub::pubsub),
    // Connection and server.
    cmd!("ping", -1, S, 0, 0, 0, server::ping),
    cmd!("echo", 2, S, 0, 0, 0, server::echo),
    cmd!("select", 2, S, 0, 0, 0, server::select),
    cmd!("quit", -1, S, 0, 0, 0, server::quit),
    cmd!("hello", -1, S, 0, 0, 0, server::hello),
    Command {
        slow: true,
        ..cmd!("info", -1, &["loading", "stale"], 0, 0, 0, server::info)
    },
    Command {
        slow: true,
        ..cmd!("compact", 1, A, 0, 0, 0, keys::compact)
    },
    // CONFIG SET appendfsync always syncs the WAL.
    Command {
        slow: true,
        ..cmd!("config", -2, A, 0, 0, 0, server::config)
    },
    cmd!(
        "command",
        -1,
        &["loading", "stale"],
        0,
        0,
        0,
        server::command
    ),
    cmd!(
        "client",
        -2,
        &["admin", "noscript", "loading", "stale"],
        0,
        0,
        0,
        server::client
    ),
    cmd!("shutdown", -1, A, 0, 0, 0, server::shutdown),
    // Cluster mode: CLUSTER runs in `cluster::admin`; here, standalone.
    cmd!("cluster", -2, &["admin", "stale"], 0, 0, 0, server::cluster),
    cmd!(
        "readonly",
        1,
        &["fast", "loading", "stale"],
        0,
        0,
        0,
        server::readonly
    ),
    cmd!(
        "readwrite",
        1,
        &["fast", "loading", "stale"],
        0,
        0,
        0,
        server::readwrite
    ),
];

fn table() -> &'static FxHashMap<&'static [u8], &'static Command> {
    static TABLE: OnceLock<FxHashMap<&'static [u8], &'static Command>> = OnceLock::new();
    TABLE.get_or_init(|| COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect())
}

/// Longest command name, in bytes.
const MAX_NAME_LEN: usize = 16;

pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    // Lower-cased on the stack: every request looks its command up.
    let mut lower = [0u8; MAX_NAME_LEN];
    let lower = lower.get_mut(..name.len())?;
    for (l, c) in lower.iter_mut().zip(name) {
        *l = c.to_ascii_lowercase();
    }
    table().get(&*lower).copied()
}

pub fn all() -> &'static [Command] {
    COMMANDS
}

impl Command {
    pub fn is_write(&self) -> bool {
        self.write
    }

    pub fn is_read(&self) -> bool {
        self.read
    }

    /// Whether `args` (the name included) has as many arguments as the
    /// command takes.
    pub fn arity_matches(&self, args: &[Vec<u8>]) -> bool {
        let n = args.len() as i32;
        (self.arity > 0 && n == self.arity) || (self.arity < 0 && n >= -self.arity)
    }

    /// Whether the command writes at most one batch, so that the batch can
    /// carry the Raft entry's being applied. FLUSHDB deletes in many
    /// batches; a crash between them leaves it to be applied again, which
    /// finds less to delete and ends the same.
    pub fn writes_one_batch(&self) -> bool {
        !self.exclusive
    }

    /// The key arguments, as the command's first, last and step say.
    pub fn keys<'a>(&self, args: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [u8]> {
        let n = args.len() as i32;
        let last = if self.last_key < 0 {
            n + self.last_key
        } else {
            self.last_key
        };
        let (first, step) = (self.first_key.max(1), self.step.max(1));
        let count = if self.first_key > 0 && last >= first {
            ((last - first) / step + 1) as usize
        } else {
            0
        };
        args.iter()
            .skip(first as usize)
            .step_by(step as usize)
            .take(count)
            .map(Vec::as_slice)
    }

    /// The first key's argument, if the command takes keys.
    pub fn first_key<'a>(&self, args: &'a [Vec<u8>]) -> Option<&'a [u8]> {
        usize::try_from(self.first_key)
            .ok()
            .filter(|&i| i > 0)
            .and_then(|i| args.get(i))
            .map(Vec::as_slice)
    }
}

/// Whether one of `requests` may block (BLPOP and its kin).
pub fn may_block(requests: &[Vec<Vec<u8>>]) -> bool {
    requests
        .iter()
        .any(|args| lookup(args.first().map_or(&[][..], Vec::as_slice)).is_some_and(|c| c.blocking))
}

/// Whether `requests` should run on a blocking thread rather than on the
/// thread serving the connection: a command that may run long, or, when
/// every write waits for an fsync, a write (so that many writers can share
/// one fsync, and the serving threads are not held for it). Everything
/// else is a few microseconds of memtable and cache work, which a hand-off
/// to another thread would cost twice over.
pub fn needs_blocking_thread(requests: &[Vec<Vec<u8>>], synced_writes: bool) -> bool {
    requests.iter().any(|args| {
        let name = args.first().map_or(&[][..], Vec::as_slice);
        match lookup(name) {
            Some(c) => c.slow || (synced_writes && c.is_write()),
            None => false,
        }
    })
}

/// Runs one request (`args[0]` is the command name, never empty).
pub fn execute(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    match dispatch(ctx, args) {
        Ok(reply) => reply,
        Err(e) => {
            if let CmdError::Engine(e) = &e {
                log::warn!("{}: {e}", args[0].escape_ascii());
            }
            e.reply()
        }
    }
}

/// Runs one request of a batch (store/batch.rs): `None` if it must run
/// again once the batch is written (`CmdError::Contended`).
pub fn execute_in_batch(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Option<Reply> {
    ctx.shared.store.batch_command_starts();
    match dispatch(ctx, args) {
        Err(CmdError::Contended) => None,
        Ok(reply) => Some(reply),
        Err(e) => {
            if let CmdError::Engine(e) = &e {
                log::warn!("{}: {e}", args[0].escape_ascii());
            }
            Some(e.reply())
        }
    }
}

/// Runs one request as [`execute`] does, but returns an engine failure
/// (a full disk, a damaged file) as an error rather than as an error
/// reply: a cluster member must not count an entry it failed to apply as
/// applied.
pub fn try_execute(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result<Reply, cleave::Error> {
    match dispatch(ctx, args) {
        Ok(reply) => Ok(reply),
        Err(CmdError::Engine(e)) => Err(e),
        Err(e) => Ok(e.reply()),
    }
}

/// Whether a batch must be written before `args` runs: the command holds
/// the database alone, or makes what the batch wrote matter to other
/// clients at once (a PUBLISH's subscriber may read the keys written
/// before it; a WATCH must not fire on writes that came before it).
pub fn commits_first(args: &[Vec<u8>]) -> bool {
    lookup(args.first().map_or(&[][..], Vec::as_slice))
        .is_some_and(|c| c.exclusive || matches!(c.name, "watch" | "publish"))
}

/// Runs one request; the error of a command that failed, engine failures
/// and `Contended` included, is for the caller to answer.
fn dispatch(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result<Reply, CmdError> {
    debug_assert!(!args.is_empty());
    let cmd = match checked(args) {
        Ok(cmd) => cmd,
        Err(reply) => {
            // A command refused while queueing aborts the transaction.
            if ctx.client.multi.is_some() {
                ctx.client.multi_failed = true;
            }
            return Ok(reply);
        }
    };
    if ctx.client.in_resp2_subscribed_mode() && !pubsub::ALLOWED_SUBSCRIBED.contains(&cmd.name) {
        return Ok(Reply::Error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            cmd.name
        )));
    }
    if let Some(queued) = ctx.client.multi.as_mut() {
        if !RUN_IN_MULTI.contains(&cmd.name) {
            queued.push(args.to_vec());
            return Ok(Reply::Status("QUEUED"));
        }
    }
    let store = &ctx.shared.store;
    if cmd.exclusive {
        // The batch, written before (`commits_first`), holds nothing.
        let _suspended = store.suspend_batch();
        let _alone = store.exclusive();
        run(ctx, cmd, args)
    } else {
        let _shared = store.shared();
        run(ctx, cmd, args)
    }
}

/// Commands that run at once after MULTI rather than being queued.
const RUN_IN_MULTI: &[&str] = &["exec", "discard", "multi", "watch", "quit"];

/// The command `args` names, if it exists and has as many arguments as it
/// takes; else the error reply.
fn checked(args: &[Vec<u8>]) -> Result<&'static Command, Reply> {
    let Some(cmd) = lookup(&args[0]) else {
        let mut msg = format!(
            "ERR unknown command '{}', with args beginning with: ",
            args[0].escape_ascii()
        );
        for a in args.iter().skip(1) {
            msg.push_str(&format!("'{}' ", a.escape_ascii()));
        }
        return Err(Reply::Error(msg));
    };
    if !cmd.arity_matches(args) {
        return Err(Reply::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            cmd.name
        )));
    }
    Ok(cmd)
}

/// Runs `cmd` under the lock its caller holds (a command's own, or the
/// EXEC it is part of), and tells the clients watching the keys it wrote.
fn run(ctx: &mut Ctx<'_>, cmd: &Command, args: &[Vec<u8>]) -> Result<Reply, CmdError> {
    let reply = (cmd.handler)(ctx, args);
    if !matches!(reply, Err(CmdError::Contended)) {
        ctx.shared.stats.commands.fetch_add(1, Ordering::Relaxed);
    }
    let reply = reply?;
    if cmd.is_write() {
        ctx.client.wrote = true;
        match cmd.name {
            "flushdb" => ctx.shared.touched_all(Some(ctx.client.db)),
            "flushall" => ctx.shared.touched_all(None),
            "copy" => {
                let db = keys::copy_destination_db(args).unwrap_or(ctx.client.db);
                ctx.shared.touched(db, args[2..3].iter().map(Vec::as_slice));
            }
            _ => ctx.shared.touched(ctx.client.db, cmd.keys(args)),
        }
    }
    Ok(reply)
}

/// An integer argument as Redis's `string2ll` reads it: no spaces, no
/// `+`, no leading zeros.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(arg).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.starts_with('+') || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    if s == "-0" {
        return None;
    }
    s.parse().ok()
}

pub fn int_arg(arg: &[u8]) -> Result<i64, CmdError> {
    parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// A float argument as Redis's `strtod` check reads it: `inf`, `+inf`,
/// `-inf` included, NaN and trailing garbage refused.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// The optional count at `args[at]`, which must be the last argument and
/// not negative (LPOP's, SPOP's, ZPOPMIN's).
pub fn optional_count(args: &[Vec<u8>], at: usize) -> Result<Option<u64>, CmdError> {
    let out_of_range = || CmdError::err("value is out of range, must be positive");
    match args.len() {
        n if n == at => Ok(None),
        n if n == at + 1 => u64::try_from(int_arg(&args[at]).map_err(|_| out_of_range())?)
            .map(Some)
            .map_err(|_| out_of_range()),
        _ => Err(CmdError::Syntax),
    }
}

/// Redis's places `start..=stop` (negative from the end) clamped to a
/// list or sorted set of `size`: `from..to`, empty (`0..0`) when they name
/// nothing.
pub fn span(start: i64, stop: i64, size: u64) -> (u64, u64) {
    let size = size as i128;
    let norm = |i: i64| if i < 0 { size + i as i128 } else { i as i128 };
    let from = norm(start).max(0);
    let to = (norm(stop) + 1).min(size);
    if from >= to {
        (0, 0)
    } else {
        (from as u64, to as u64)
    }
}

/// True if `arg` equals `word`, ignoring ASCII case (option names).
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_is_found_by_its_name_and_says_its_flags() {
        for c in all() {
            let found = lookup(c.name.to_ascii_uppercase().as_bytes()).unwrap();
            assert!(std::ptr::eq(found, c), "{}", c.name);
            assert_eq!(c.is_write(), c.flags.contains(&"write"), "{}", c.name);
            assert_eq!(c.is_read(), c.flags.contains(&"readonly"), "{}", c.name);
            assert_eq!(c.blocking, c.flags.contains(&"blocking"), "{}", c.name);
        }
        assert!(lookup(b"blpop").is_some_and(|c| c.blocking && c.is_write()));
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'x'; MAX_NAME_LEN + 1]).is_none());
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"9223372036854775808"[..],
            b"+1",
            b"01",
            b" 1",
            b"1 ",
            b"",
            b"-",
            b"-0",
            b"1.0",
            b"0x1",
        ] {
            assert_eq!(parse_i64(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn floats_take_infinities_and_refuse_nan() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        for bad in [&b"nan"[..], b"NaN", b"1.5x", b"", b" 1"] {
            assert_eq!(parse_f64(bad), None);
        }
    }

    #[test]
    fn the_table_has_one_entry_per_name() {
        assert_eq!(table().len(), COMMANDS.len());
        assert!(COMMANDS.iter().all(|c| c.name.len() <= MAX_NAME_LEN));
        assert!(lookup(&[b'a'; 100]).is_none());
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nope").is_none());
    }
}
