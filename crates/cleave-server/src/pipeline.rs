//! A connection's pipelined requests, run in order on one thread: two or
//! more as one batch (store/batch.rs), whose writes reach the engine
//! together; the replies encoded, after the WAL has reached the OS.

use crate::commands::{self, Ctx};
use crate::error::CmdError;
use crate::state::{Client, Shared, Wait};

/// What running a batch left: the client, the encoded replies, and the
/// requests a blocked command holds up (it first).
pub type Ran = (Client, Vec<u8>, Vec<Vec<Vec<u8>>>);

/// Most bytes of writes a batch gathers before they are written: bounds
/// the memory a pipeline of large values holds twice (its requests and
/// the batch), and the WAL record.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// Runs `requests` in order, stopping after one that closes the
/// connection, at one that blocks, or at one that needs a key lock another
/// batch holds (`client.lock_wait` then names it; the requests from that
/// one on are held). Two or more run as one batch (store/batch.rs): their
/// writes reach the engine together, before any reply is sent.
pub fn execute(shared: &Shared, mut client: Client, requests: Vec<Vec<Vec<u8>>>) -> Ran {
    let mut out = Vec::new();
    let mut held = Vec::new();
    client.wrote = false;
    if requests.len() == 1 {
        let mut requests = requests;
        run_one(shared, &mut client, &mut requests, &mut out, &mut held);
    } else {
        let batch = shared.store.begin_batch();
        let mut replies = Replies::default();
        let mut requests = requests;
        requests.reverse();
        while !requests.is_empty() {
            let args = &requests[requests.len() - 1];
            // Its effect is not the batch's (EXEC and FLUSHDB write on their
            // own, PUBLISH delivers at once): its reply stands whatever the
            // batch's write does.
            let outside = commands::commits_first(args);
            if outside {
                replies.commit(shared, &client, &mut out);
            }
            let at = out.len();
            let Some(ran) = run_one(shared, &mut client, &mut requests, &mut out, &mut held) else {
                // The command found a key locked by another batch and
                // stopped. Written, this batch holds no lock: the command
                // tries again, and if it still finds the lock taken, the
                // connection awaits it, holding the requests from there on.
                let contended = shared.store.contended_stripe();
                replies.commit(shared, &client, &mut out);
                match contended {
                    Some((_, true)) => continue,
                    Some((stripe, false)) => {
                        client.lock_wait = Some(stripe);
                        held.extend(requests.drain(..).rev());
                        break;
                    }
                    None => {
                        debug_assert!(false, "contended, but on no stripe");
                        continue;
                    }
                }
            };
            if out.len() > at && !outside {
                replies.began(at);
            }
            if !ran || shared.store.batch_bytes() >= MAX_BATCH_BYTES {
                replies.commit(shared, &client, &mut out);
            }
            if !ran {
                break;
            }
        }
        let written = batch.end();
        replies.answer(written, &client, &mut out);
    }
    flush_before_replying(shared, &mut client, &mut out);
    (client, out, held)
}

/// Runs the request at the end of `requests` (which lists them last
/// first) and writes its reply to `out`: `Some(true)` if the next may
/// run, `Some(false)` if none may (the connection closes, or the request
/// blocked and, with those after it, moved to `held`), `None` if it must
/// run again after the batch is written (the request stays).
fn run_one(
    shared: &Shared,
    client: &mut Client,
    requests: &mut Vec<Vec<Vec<u8>>>,
    out: &mut Vec<u8>,
    held: &mut Vec<Vec<Vec<u8>>>,
) -> Option<bool> {
    let args = requests.last()?;
    let mut ctx = Ctx { shared, client };
    let reply = if shared.store.in_batch() {
        commands::execute_in_batch(&mut ctx, args)?
    } else {
        commands::execute(&mut ctx, args)
    };
    let args = requests.pop()?;
    if matches!(client.wait, Wait::Blocked(_)) {
        held.push(args);
        held.extend(requests.drain(..).rev());
        return Some(false);
    }
    client.wait = Wait::None;
    if client.silent {
        return Some(false);
    }
    reply.write_to(client.proto, out);
    Some(!client.close)
}

/// The replies of a batch's commands not yet written: where in the
/// output they begin, and how many there are.
#[derive(Default)]
struct Replies {
    start: Option<usize>,
    count: usize,
}

impl Replies {
    /// A reply starting at `at` in the output joins the unwritten.
    fn began(&mut self, at: usize) {
        self.start.get_or_insert(at);
        self.count += 1;
    }

    /// Writes the batch so far; its replies become answers.
    fn commit(&mut self, shared: &Shared, client: &Client, out: &mut Vec<u8>) {
        let written = shared.store.commit_batch();
        self.answer(written, client, out);
    }

    /// With the batch so far written, or not (`written`), its replies
    /// stand, or each becomes the write's error: a command may have
    /// answered from what was never written.
    fn answer(&mut self, written: Result<(), CmdError>, client: &Client, out: &mut Vec<u8>) {
        let (start, count) = (self.start.take(), std::mem::take(&mut self.count));
        if let (Err(e), Some(start)) = (written, start) {
            log::warn!(
                "client {}: a batch of {count} commands failed: {e:?}",
                client.id
            );
            out.truncate(start);
            let reply = e.reply();
            for _ in 0..count {
                reply.write_to(client.proto, out);
            }
        }
    }
}

/// Hands the WAL's buffered records to the OS before `out` is sent: the
/// replies may acknowledge writes, this batch's or others' it read. If
/// that fails after this batch wrote, its writes' fate is unknown: the
/// connection closes with no reply rather than acknowledge them. (A batch
/// that only read gets its replies: the database refuses writes from now
/// on, and what it read was answered to nobody else.)
pub fn flush_before_replying(shared: &Shared, client: &mut Client, out: &mut Vec<u8>) {
    if let Err(e) = shared.store.flush_wal() {
        if client.wrote {
            log::warn!("client {}: closing unanswered: {e}", client.id);
            out.clear();
            client.close = true;
        }
    }
}
