//! Pub/Sub: which clients listen on which channels and patterns, and the
//! queue each subscribed connection's messages wait in until its task
//! writes them out. Messages are not stored: a client that is not
//! subscribed when one is published never sees it, as in Redis.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::glob;

/// Messages queued for one subscriber before it counts as too slow and is
/// disconnected, as Redis's `client-output-buffer-limit pubsub` does.
pub const SUBSCRIBER_QUEUE_MESSAGES: usize = 16 << 10;

/// A message for a subscriber: the pattern it matched (PSUBSCRIBE), the
/// channel, the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub pattern: Option<Vec<u8>>,
    pub channel: Vec<u8>,
    pub payload: Vec<u8>,
}

/// Where a subscriber's messages go, and whether it was dropped for
/// falling behind.
#[derive(Debug, Clone)]
pub struct Inbox {
    tx: mpsc::Sender<Message>,
    dropped: Arc<AtomicBool>,
}

#[derive(Default)]
struct Subscribers {
    channels: HashMap<Vec<u8>, HashMap<u64, Inbox>>,
    patterns: HashMap<Vec<u8>, HashMap<u64, Inbox>>,
}

#[derive(Default)]
pub struct PubSub {
    subs: Mutex<Subscribers>,
}

/// A subscribed client's side: its channels and patterns, and the queue
/// its connection reads.
#[derive(Debug)]
pub struct Subscription {
    pub inbox: Inbox,
    pub messages: mpsc::Receiver<Message>,
    pub channels: BTreeSet<Vec<u8>>,
    pub patterns: BTreeSet<Vec<u8>>,
}

impl Default for Subscription {
    fn default() -> Subscription {
        let (tx, messages) = mpsc::channel(SUBSCRIBER_QUEUE_MESSAGES);
        Subscription {
            inbox: Inbox {
                tx,
                dropped: Arc::new(AtomicBool::new(false)),
            },
            messages,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
        }
    }
}

impl Subscription {
    /// Whether the server dropped this subscriber for falling behind: its
    /// connection closes.
    pub fn dropped(&self) -> bool {
        self.inbox.dropped.load(Ordering::Acquire)
    }

    /// Channels and patterns together, as the subscription counts in
    /// Redis's replies.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

impl PubSub {
    pub fn subscribe(&self, client: u64, inbox: &Inbox, channel: &[u8], pattern: bool) {
        let mut s = self.subs.lock();
        let map = if pattern {
            &mut s.patterns
        } else {
            &mut s.channels
        };
        map.entry(channel.to_vec())
            .or_default()
            .insert(client, inbox.clone());
    }

    pub fn unsubscribe(&self, client: u64, channel: &[u8], pattern: bool) {
        let mut s = self.subs.lock();
        let map = if pattern {
            &mut s.patterns
        } else {
            &mut s.channels
        };
        if let Some(clients) = map.get_mut(channel) {
            clients.remove(&client);
            if clients.is_empty() {
                map.remove(channel);
            }
        }
    }

    /// Sends `payload` to the subscribers of `channel` and of the patterns
    /// it matches; returns how many received it. A subscriber whose queue
    /// is full misses it and is dropped, so that its connection closes.
    pub fn publish(&self, channel: &[u8], payload: &[u8]) -> usize {
        let mut s = self.subs.lock();
        let mut received = 0;
        let mut slow = Vec::new();
        let mut deliver = |client: u64, inbox: &Inbox, pattern: Option<&[u8]>| {
            let m = Message {
                pattern: pattern.map(<[u8]>::to_vec),
                channel: channel.to_vec(),
                payload: payload.to_vec(),
            };
            match inbox.tx.try_send(m) {
                Ok(()) => received += 1,
                Err(_) => {
                    inbox.dropped.store(true, Ordering::Release);
                    slow.push(client);
                }
            }
        };
        if let Some(clients) = s.channels.get(channel) {
            for (&id, inbox) in clients {
                deliver(id, inbox, None);
            }
        }
        for (pattern, clients) in &s.patterns {
            if glob::matches(pattern, channel) {
                for (&id, inbox) in clients {
                    deliver(id, inbox, Some(pattern));
                }
            }
        }
        for id in slow {
            log::warn!("client {id}: pubsub queue full, disconnecting it");
            Self::forget_in(&mut s, id);
        }
        received
    }

    /// Forgets every subscription of `client` (it disconnected, or was
    /// too slow).
    pub fn forget(&self, client: u64) {
        Self::forget_in(&mut self.subs.lock(), client);
    }

    fn forget_in(s: &mut Subscribers, client: u64) {
        for map in [&mut s.channels, &mut s.patterns] {
            map.retain(|_, clients| {
                clients.remove(&client);
                !clients.is_empty()
            });
        }
    }

    /// PUBSUB CHANNELS: channels with a subscriber, matching `pattern`.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let s = self.subs.lock();
        let mut out: Vec<Vec<u8>> = s
            .channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c)))
            .cloned()
            .collect();
        out.sort();
        out
    }

    /// PUBSUB NUMSUB: subscribers of `channel` (patterns not counted).
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.subs
            .lock()
            .channels
            .get(channel)
            .map_or(0, HashMap::len)
    }

    /// PUBSUB NUMPAT: patterns with a subscriber.
    pub fn numpat(&self) -> usize {
        self.subs.lock().patterns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_reach_channel_and_pattern_subscribers() {
        let ps = PubSub::default();
        let mut a = Subscription::default();
        let mut b = Subscription::default();
        ps.subscribe(1, &a.inbox, b"news", false);
        ps.subscribe(2, &b.inbox, b"n*", true);
        assert_eq!(ps.publish(b"news", b"hi"), 2);
        assert_eq!(ps.publish(b"nope", b"x"), 1);
        assert_eq!(ps.publish(b"other", b"x"), 0);
        assert_eq!(a.messages.try_recv().unwrap().payload, b"hi");
        let m = b.messages.try_recv().unwrap();
        assert_eq!(m.pattern.as_deref(), Some(&b"n*"[..]));
        assert_eq!(b.messages.try_recv().unwrap().channel, b"nope");
        assert_eq!(ps.channels(None), vec![b"news".to_vec()]);
        assert_eq!((ps.numsub(b"news"), ps.numpat()), (1, 1));
        ps.unsubscribe(1, b"news", false);
        ps.forget(2);
        assert_eq!(ps.publish(b"news", b"again"), 0);
        assert!(ps.channels(None).is_empty());
    }

    #[test]
    fn a_subscriber_that_does_not_read_is_dropped() {
        let ps = PubSub::default();
        let slow = Subscription::default();
        ps.subscribe(1, &slow.inbox, b"c", false);
        for _ in 0..SUBSCRIBER_QUEUE_MESSAGES {
            assert_eq!(ps.publish(b"c", b"m"), 1);
        }
        assert!(!slow.dropped());
        assert_eq!(ps.publish(b"c", b"m"), 0);
        assert_eq!(ps.numsub(b"c"), 0);
        assert!(slow.dropped());
    }
}
