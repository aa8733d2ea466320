//! Transactions: MULTI queues a client's commands, EXEC runs them alone
//! (no other client's command runs meanwhile) and writes their changes as
//! one batch, DISCARD drops them; WATCH makes EXEC do nothing if a watched
//! key changed first (optimistic locking, as Redis's).

use super::{lookup, run, Ctx};
use crate::error::CmdError;
use crate::resp::Reply;
use crate::store::Store;

/// A transaction EXEC began: unless ended, dropping it (a panic of a
/// queued command) drops the transaction whole.
struct OpenTxn<'a> {
    store: &'a Store,
    ended: bool,
}

impl OpenTxn<'_> {
    fn end(mut self, commit: bool) -> std::result::Result<(), CmdError> {
        self.ended = true;
        self.store.end_txn(commit)
    }
}

impl Drop for OpenTxn<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.store.end_txn(false);
        }
    }
}

type Result = std::result::Result<Reply, CmdError>;

fn refuse_in_cluster(ctx: &Ctx<'_>, what: &str) -> std::result::Result<(), CmdError> {
    if ctx.shared.cluster.get().is_some() {
        // Each command goes through the Raft log on its own; a
        // transaction would need to be one entry.
        return Err(CmdError::err(format!(
            "{what} is not supported in cluster mode"
        )));
    }
    Ok(())
}

pub fn multi(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    refuse_in_cluster(ctx, "MULTI")?;
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_failed = false;
    Ok(Reply::ok())
}

pub fn discard(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    if ctx.client.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client.multi_failed = false;
    ctx.shared.unwatch(ctx.client.id);
    Ok(Reply::ok())
}

pub fn watch(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    refuse_in_cluster(ctx, "WATCH")?;
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    for key in &args[1..] {
        ctx.shared.watch(ctx.client.id, ctx.client.db, key);
    }
    Ok(Reply::ok())
}

pub fn unwatch(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    ctx.shared.unwatch(ctx.client.id);
    Ok(Reply::ok())
}

/// Runs the queued commands holding the database alone (the command table
/// marks EXEC exclusive), their writes gathered into one batch that is
/// written at the end: a crash leaves all of them or none. An error reply
/// of one command is its reply in the array, as in Redis; an engine
/// failure (a full disk) drops the whole batch and is EXEC's reply.
pub fn exec(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    let Some(queued) = ctx.client.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let failed = std::mem::take(&mut ctx.client.multi_failed);
    let touched = ctx.shared.unwatch(ctx.client.id);
    if failed {
        return Err(CmdError::Reply(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    if touched {
        return Ok(Reply::NilArray);
    }
    let shared = ctx.shared;
    shared.store.begin_txn();
    // Ended on every way out, a panic of a queued command included: left
    // open, the overlay would take every later write of every client.
    let open = OpenTxn {
        store: &shared.store,
        ended: false,
    };
    let may_block = std::mem::replace(&mut ctx.client.may_block, false);
    let mut replies = Vec::with_capacity(queued.len());
    let mut failure = None;
    for args in &queued {
        // Queued only once looked up and checked for arity.
        let Some(cmd) = lookup(&args[0]) else {
            replies.push(Reply::error("ERR unknown command"));
            continue;
        };
        match run(ctx, cmd, args) {
            Ok(r) => replies.push(r),
            Err(CmdError::Engine(e)) => {
                failure = Some(e);
                break;
            }
            Err(e) => replies.push(e.reply()),
        }
    }
    ctx.client.may_block = may_block;
    open.end(failure.is_none())?;
    match failure {
        Some(e) => Err(CmdError::Engine(e)),
        None => Ok(Reply::Array(replies)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use cleave::{Options, ReadOptions, WriteBatch};

    use super::*;
    use crate::store::FsyncMode;

    /// A transaction left without its end (a queued command panicked) is
    /// dropped whole, and the writes after it reach the database.
    #[test]
    fn a_transaction_dropped_unended_is_dropped_whole() {
        let opts = Options {
            fs: Arc::new(cleave::vfs::MemFs::new()),
            ..Options::default()
        };
        let store = Store::open(Path::new("/d"), opts, FsyncMode::No).unwrap();
        let put = |key: &[u8]| {
            let mut b = WriteBatch::new();
            b.put(key, b"v");
            store.write(b).unwrap();
        };
        store.begin_txn();
        {
            let _open = OpenTxn {
                store: &store,
                ended: false,
            };
            put(b"in-the-transaction");
        }
        put(b"after");
        let r = ReadOptions::new();
        assert!(store.db().get(&r, b"after").unwrap().is_some());
        assert!(store.db().get(&r, b"in-the-transaction").unwrap().is_none());
    }
}
