//! Transactions: MULTI queues a client's commands, EXEC runs them alone
//! (no other client's command runs meanwhile) and writes their changes as
//! one batch, DISCARD drops them; WATCH makes EXEC do nothing if a watched
//! key changed first (optimistic locking, as Redis's).

use super::{lookup, run, Ctx};
use crate::error::CmdError;
use crate::resp::Reply;

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
    // Under the keys' locks: a batch that wrote one holds its lock until
    // it is written, and tells the watchers then; one that writes it
    // later finds the watch registered.
    let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    let _lock = ctx.shared.store.lock(ctx.client.db, &keys)?;
    for key in keys {
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
    // The commands' writes gather into one batch (the connection's, if
    // any, is set aside: EXEC holds the database alone). Dropped whole on
    // any other way out, a panic of a queued command included.
    let batch = shared.store.begin_batch();
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
    if let Some(e) = failure {
        drop(batch);
        return Err(CmdError::Engine(e));
    }
    batch.end()?;
    Ok(Reply::Array(replies))
}
