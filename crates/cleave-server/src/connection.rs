//! One client connection: reads requests, runs each pipelined batch (on
//! the serving thread, or on a blocking thread when it may take long:
//! `commands::needs_blocking_thread`), writes the replies in order.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::commands;
use crate::pipeline::{execute, flush_before_replying};
use crate::pubsub::Message;
use crate::resp::{parse_request, Reply};
use crate::state::{Client, Counters, Shared, Wait};
use crate::store::FsyncMode;

/// Most requests of one pipeline run in one blocking task: bounds the
/// replies held in memory before they are written.
const MAX_BATCH_REQUESTS: usize = 1024;

/// Bytes read from the socket at a time, at least.
const READ_CHUNK_BYTES: usize = 16 << 10;

pub async fn serve(shared: Arc<Shared>, mut stream: TcpStream, addr: String) {
    let Some(client) = shared.connect(addr) else {
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    };
    let id = client.id;
    // Unregistered however the task ends, a command's panic included.
    let _registered = Registered(&shared, id);
    let _ = stream.set_nodelay(true);
    if let Err(e) = run(&shared, &mut stream, client).await {
        log::debug!("client {id}: {e}");
    }
}

/// A connected client's entry in `Shared::clients`, removed on drop.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.disconnect(self.1);
    }
}

async fn run(shared: &Arc<Shared>, stream: &mut TcpStream, client: Client) -> std::io::Result<()> {
    let mut client = Some(client);
    let mut shutdown = shared.shutdown_signal();
    // Subscribed before the first blocking command runs, so that no push
    // after its first look goes unseen.
    let mut pushes: Option<watch::Receiver<u64>> = None;
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut start = 0;
    // Requests a blocking command holds up: it first, those pipelined
    // after it behind it, as Redis holds them.
    let mut held: Vec<Vec<Vec<u8>>> = Vec::new();
    // Answered, and the connection closed, once the requests before the
    // bad one have all run (held ones included).
    let mut protocol_error = None;
    loop {
        let (max_bulk, buffer_limit) = {
            let l = shared.limits.read();
            (l.proto_max_bulk_len, l.query_buffer_limit)
        };
        let mut requests = Vec::new();
        if let Some(stripe) = client.as_mut().and_then(|c| c.lock_wait.take()) {
            // Held requests wait for a key lock another batch holds: a
            // batch never waits holding locks, so this ends.
            tokio::select! {
                _ = shared.store.stripe_released(stripe) => {}
                _ = shutdown.wait_for(|down| *down) => return Ok(()),
            }
            requests = std::mem::take(&mut held);
        } else if !held.is_empty() {
            // Held requests wait on a blocked command, subscribed.
            let (Some(c), Some(rx)) = (client.as_mut(), &mut pushes) else {
                return Ok(());
            };
            let Wait::Blocked(deadline) = c.wait else {
                return Ok(());
            };
            let timeout = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = rx.changed() => c.wait = Wait::Retry(deadline),
                _ = timeout => c.wait = Wait::TimedOut,
                n = stream.read_buf(&mut buf) => {
                    // Requests sent meanwhile wait in the buffer; a closed
                    // connection ends the wait.
                    let n = n?;
                    if n == 0 || buf.len() - start > buffer_limit {
                        return Ok(());
                    }
                    Counters::add(&shared.stats.input_bytes, n as u64);
                    continue;
                }
                _ = shutdown.wait_for(|down| *down) => return Ok(()),
            }
            requests = std::mem::take(&mut held);
        } else {
            while requests.len() < MAX_BATCH_REQUESTS {
                match parse_request(&buf[start..], max_bulk) {
                    Ok(Some((args, used))) => {
                        start += used;
                        if !args.is_empty() {
                            requests.push(args);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        protocol_error = Some(e);
                        break;
                    }
                }
            }
        }
        let more_parsed = requests.len() == MAX_BATCH_REQUESTS;
        if !requests.is_empty() || protocol_error.is_some() {
            let Some(c) = client.take() else {
                return Ok(());
            };
            if pushes.is_none() && commands::may_block(&requests) {
                pushes = Some(shared.pushes());
            }
            if let Some(rx) = &mut pushes {
                rx.borrow_and_update();
            }
            let synced = shared.store.fsync_mode() == FsyncMode::Always;
            let (c, mut out, rest) = if let Some(cluster) = shared.cluster.get() {
                let (mut c, mut out) = crate::cluster::execute(shared, cluster, c, requests).await;
                // Reads on a member may show what its state machine
                // applied; the Raft log holds every write it acknowledged.
                flush_before_replying(shared, &mut c, &mut out);
                (c, out, Vec::new())
            } else if commands::needs_blocking_thread(&requests, synced) {
                let worker = Arc::clone(shared);
                let done = tokio::task::spawn_blocking(move || execute(&worker, c, requests)).await;
                let Ok(done) = done else {
                    // A command panicked: drop this client, keep the server.
                    return Ok(());
                };
                done
            } else {
                execute(shared, c, requests)
            };
            held = rest;
            let mut close = c.close;
            if let Some(e) = protocol_error.take_if(|_| held.is_empty()) {
                Counters::add(&shared.stats.protocol_errors, 1);
                Reply::error(format!("ERR Protocol error: {}", e.0)).write_to(c.proto, &mut out);
                close = true;
            }
            client = Some(c);
            if !out.is_empty() {
                Counters::add(&shared.stats.output_bytes, out.len() as u64);
                stream.write_all(&out).await?;
            }
            if close {
                return Ok(());
            }
            if !held.is_empty() {
                continue;
            }
        }
        if start == buf.len() {
            buf.clear();
            start = 0;
        } else if start > buf.len() / 2 {
            buf.drain(..start);
            start = 0;
        }
        if more_parsed {
            continue;
        }
        if buf.len() - start > buffer_limit {
            log::warn!("closing client that reached max query buffer length");
            return Ok(());
        }
        if shared.is_shutting_down() {
            return Ok(());
        }
        buf.reserve(READ_CHUNK_BYTES);
        let mut message = None;
        tokio::select! {
            n = stream.read_buf(&mut buf) => {
                let n = n?;
                if n == 0 {
                    return Ok(());
                }
                Counters::add(&shared.stats.input_bytes, n as u64);
            }
            m = next_message(&mut client) => message = Some(m),
            _ = shutdown.wait_for(|down| *down) => return Ok(()),
        }
        if let Some(m) = message {
            let Some(c) = client.as_mut() else {
                return Ok(());
            };
            let out = messages(c, m);
            Counters::add(&shared.stats.output_bytes, out.len() as u64);
            stream.write_all(&out).await?;
            if c.subscription.as_ref().is_some_and(|s| s.dropped()) {
                // Fell behind the messages published to it.
                return Ok(());
            }
        }
    }
}

/// Messages published to a subscribed client written out at once: the
/// most one write carries.
const MAX_MESSAGES_PER_WRITE: usize = 256;

/// The next message for `client`, once it is subscribed; never otherwise.
async fn next_message(client: &mut Option<Client>) -> Option<Message> {
    match client.as_mut().and_then(|c| c.subscription.as_mut()) {
        Some(s) => s.messages.recv().await,
        None => std::future::pending().await,
    }
}

/// `first` and the messages queued behind it, encoded as the client's
/// protocol has them: pushes in RESP3, arrays in RESP2.
fn messages(client: &mut Client, first: Option<Message>) -> Vec<u8> {
    let mut out = Vec::new();
    let proto = client.proto;
    let Some(sub) = client.subscription.as_mut() else {
        return out;
    };
    let mut next = first;
    for written in 1..=MAX_MESSAGES_PER_WRITE {
        let Some(m) = next.take() else {
            break;
        };
        let push = match m.pattern {
            Some(p) => Reply::Push(vec![
                Reply::bulk("pmessage"),
                Reply::Bulk(p),
                Reply::Bulk(m.channel),
                Reply::Bulk(m.payload),
            ]),
            None => Reply::Push(vec![
                Reply::bulk("message"),
                Reply::Bulk(m.channel),
                Reply::Bulk(m.payload),
            ]),
        };
        push.write_to(proto, &mut out);
        if written < MAX_MESSAGES_PER_WRITE {
            next = sub.messages.try_recv().ok();
        }
    }
    out
}
