//! Pub/Sub commands: SUBSCRIBE and PSUBSCRIBE put the connection in
//! subscribed mode, where published messages reach it as pushes (RESP3)
//! or arrays (RESP2) between replies; PUBLISH and PUBSUB work from any
//! connection.

use super::Ctx;
use crate::error::CmdError;
use crate::pubsub::Subscription;
use crate::resp::Reply;

type Result = std::result::Result<Reply, CmdError>;

/// Commands a RESP2 connection in subscribed mode may run.
pub const ALLOWED_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "ping",
    "quit",
];

fn confirm(kind: &str, channel: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk(kind),
        channel.map_or(Reply::Nil, Reply::bulk),
        Reply::Int(count as i64),
    ])
}

fn subscribe_to(ctx: &mut Ctx<'_>, args: &[Vec<u8>], pattern: bool) -> Result {
    let id = ctx.client.id;
    let sub = ctx
        .client
        .subscription
        .get_or_insert_with(Subscription::default);
    let mut replies = Vec::with_capacity(args.len() - 1);
    for ch in &args[1..] {
        let set = if pattern {
            &mut sub.patterns
        } else {
            &mut sub.channels
        };
        if set.insert(ch.clone()) {
            ctx.shared.pubsub.subscribe(id, &sub.inbox, ch, pattern);
        }
        let kind = if pattern { "psubscribe" } else { "subscribe" };
        replies.push(confirm(kind, Some(ch), sub.count()));
    }
    Ok(Reply::Many(replies))
}

fn unsubscribe_from(ctx: &mut Ctx<'_>, args: &[Vec<u8>], pattern: bool) -> Result {
    let id = ctx.client.id;
    let kind = if pattern {
        "punsubscribe"
    } else {
        "unsubscribe"
    };
    let Some(sub) = ctx.client.subscription.as_mut() else {
        return Ok(confirm(kind, None, 0));
    };
    let set = if pattern {
        &mut sub.patterns
    } else {
        &mut sub.channels
    };
    // No argument: every channel (or pattern) the client has.
    let names: Vec<Vec<u8>> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        set.iter().cloned().collect()
    };
    if names.is_empty() {
        return Ok(confirm(kind, None, sub.count()));
    }
    let mut replies = Vec::with_capacity(names.len());
    for ch in names {
        let set = if pattern {
            &mut sub.patterns
        } else {
            &mut sub.channels
        };
        if set.remove(&ch) {
            ctx.shared.pubsub.unsubscribe(id, &ch, pattern);
        }
        replies.push(confirm(kind, Some(&ch), sub.count()));
    }
    // The queue stays: messages published before the unsubscribe are
    // still delivered, as Redis has them in the client's buffer already.
    Ok(Reply::Many(replies))
}

pub fn subscribe(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    subscribe_to(ctx, args, false)
}

pub fn psubscribe(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    subscribe_to(ctx, args, true)
}

pub fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    unsubscribe_from(ctx, args, false)
}

pub fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    unsubscribe_from(ctx, args, true)
}

pub fn publish(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    Ok(Reply::Int(
        ctx.shared.pubsub.publish(&args[1], &args[2]) as i64
    ))
}

pub fn pubsub(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let ps = &ctx.shared.pubsub;
    let sub = args[1].to_ascii_lowercase();
    match (sub.as_slice(), &args[2..]) {
        (b"channels", [] | [_]) => Ok(Reply::Array(
            ps.channels(args.get(2).map(Vec::as_slice))
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        )),
        (b"numsub", channels) => Ok(Reply::Array(
            channels
                .iter()
                .flat_map(|c| [Reply::Bulk(c.clone()), Reply::Int(ps.numsub(c) as i64)])
                .collect(),
        )),
        (b"numpat", []) => Ok(Reply::Int(ps.numpat() as i64)),
        (b"help", []) => Ok(Reply::Array(
            [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "HELP",
                "    Print this help.",
            ]
            .iter()
            .map(|l| Reply::Status(l))
            .collect(),
        )),
        _ => Err(CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            args[1].escape_ascii()
        ))),
    }
}
