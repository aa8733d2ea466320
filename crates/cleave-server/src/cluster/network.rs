//! The Raft transport between members: TCP, one connection per peer,
//! frames of module `frame` carrying openraft's requests and replies as
//! JSON, and snapshots sent file by file. A test hook cuts a node off from
//! chosen peers: what it would send them fails as unreachable, and what
//! they send it is dropped unanswered, as a network partition would.

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError,
    Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{OptionalSend, RPCTypes, Snapshot, Vote};
use parking_lot::RwLock;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};
use tokio::net::{TcpListener, TcpStream};

use super::layout;
use super::snapshot;
use super::types::{Member, NodeId, Raft, ServerConfig, SnapshotDir, SnapshotMeta};
use crate::frame::{self, Kind, HEADER_BYTES};

/// Bytes of a snapshot's files per frame.
const SNAPSHOT_CHUNK_BYTES: usize = 1 << 20;
/// Longest wait for one frame of a snapshot, or for a connection.
const SNAPSHOT_FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for a follower to install a snapshot it received.
const SNAPSHOT_INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// The partition test hook (`CLUSTER TEST-PARTITION`).
#[derive(Debug, Default)]
pub struct Hooks {
    cut: RwLock<HashSet<NodeId>>,
}

impl Hooks {
    /// From now on this node and `peers` do not hear each other.
    pub fn cut_off(&self, peers: impl IntoIterator<Item = NodeId>) {
        self.cut.write().extend(peers);
    }

    /// Ends every cut.
    pub fn heal(&self) {
        self.cut.write().clear();
    }

    pub fn is_cut(&self, peer: NodeId) -> bool {
        self.cut.read().contains(&peer)
    }

    pub fn cut_peers(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.cut.read().iter().copied().collect();
        v.sort_unstable();
        v
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    from: NodeId,
    rpc: T,
}

#[derive(Serialize, Deserialize)]
struct SnapshotHeader {
    from: NodeId,
    vote: Vote<NodeId>,
    meta: SnapshotMeta,
    /// Relative paths and sizes, in the order their bytes follow.
    files: Vec<(String, u64)>,
}

/// Reads one frame; `None` at a clean end of the stream.
async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<(Kind, Vec<u8>)>> {
    let mut head = [0u8; HEADER_BYTES];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let header = frame::decode_header(&head).map_err(io::Error::other)?;
    let mut body = vec![0u8; header.len as usize];
    r.read_exact(&mut body).await?;
    frame::check_body(&header, &body).map_err(io::Error::other)?;
    Ok(Some((header.kind, body)))
}

async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, kind: Kind, body: &[u8]) -> io::Result<()> {
    let mut out = Vec::new();
    frame::encode(kind, body, &mut out).map_err(io::Error::other)?;
    w.write_all(&out).await?;
    w.flush().await
}

async fn within<T>(limit: Duration, f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}

fn json<T: Serialize>(v: &T) -> io::Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(io::Error::other)
}

fn from_json<T: DeserializeOwned>(b: &[u8]) -> io::Result<T> {
    serde_json::from_slice(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Makes the clients openraft replicates through.
pub struct Network {
    pub me: NodeId,
    pub hooks: Arc<Hooks>,
}

impl RaftNetworkFactory<ServerConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> Peer {
        Peer {
            me: self.me,
            target,
            addr: node.raft.clone(),
            hooks: self.hooks.clone(),
            conn: None,
        }
    }
}

/// The connection to one peer, opened when first needed and again after
/// a failure.
pub struct Peer {
    me: NodeId,
    target: NodeId,
    addr: String,
    hooks: Arc<Hooks>,
    conn: Option<BufStream<TcpStream>>,
}

/// How a call to a peer failed.
enum CallError {
    Cut,
    Connect(io::Error),
    Timeout,
    Io(io::Error),
}

impl Peer {
    async fn connection(
        &mut self,
        limit: Duration,
    ) -> Result<&mut BufStream<TcpStream>, CallError> {
        if self.hooks.is_cut(self.target) {
            self.conn = None;
            return Err(CallError::Cut);
        }
        if self.conn.is_none() {
            let stream = within(limit, TcpStream::connect(&self.addr))
                .await
                .map_err(CallError::Connect)?;
            let _ = stream.set_nodelay(true);
            self.conn = Some(BufStream::new(stream));
        }
        self.conn.as_mut().ok_or(CallError::Cut)
    }

    /// Sends one request frame and reads the reply's body.
    async fn call(
        &mut self,
        kind: Kind,
        body: &[u8],
        limit: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let conn = self.connection(limit).await?;
        let result = tokio::time::timeout(limit, async {
            write_frame(conn, kind, body).await?;
            read_reply(conn).await
        })
        .await;
        match result {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => {
                self.conn = None;
                Err(CallError::Io(e))
            }
            Err(_) => {
                // The reply may still come: the connection is out of step.
                self.conn = None;
                Err(CallError::Timeout)
            }
        }
    }

    fn rpc_error<E: std::error::Error>(
        &self,
        e: CallError,
        action: RPCTypes,
        limit: Duration,
    ) -> RPCError<NodeId, Member, E> {
        match e {
            CallError::Cut => RPCError::Unreachable(Unreachable::new(&io::Error::new(
                io::ErrorKind::NotConnected,
                format!("node {} is cut off by the test hook", self.target),
            ))),
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Timeout => RPCError::Timeout(Timeout {
                action,
                id: self.me,
                target: self.target,
                timeout: limit,
            }),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
        }
    }

    async fn rpc<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        kind: Kind,
        action: RPCTypes,
        rpc: Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, Member, RaftError<NodeId>>> {
        let limit = option.hard_ttl();
        let body = json(&Envelope { from: self.me, rpc })
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let reply = self
            .call(kind, &body, limit)
            .await
            .map_err(|e| self.rpc_error(e, action, limit))?;
        let result: Result<Resp, RaftError<NodeId>> =
            from_json(&reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn send_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: &Snapshot<ServerConfig>,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<ServerConfig, Fatal<NodeId>>> {
        let dir = snapshot.snapshot.path.clone();
        let files = snapshot::files(&dir)
            .map_err(|e| StreamingError::Network(NetworkError::new(&io::Error::other(e))))?;
        let header = SnapshotHeader {
            from: self.me,
            vote,
            meta: snapshot.meta.clone(),
            files: files.clone(),
        };
        let to_streaming = |p: &Peer,
                            e: CallError|
         -> StreamingError<ServerConfig, Fatal<NodeId>> {
            match p.rpc_error::<Fatal<NodeId>>(e, RPCTypes::InstallSnapshot, SNAPSHOT_FRAME_TIMEOUT)
            {
                RPCError::Timeout(t) => StreamingError::Timeout(t),
                RPCError::Unreachable(u) => StreamingError::Unreachable(u),
                RPCError::Network(n) => StreamingError::Network(n),
                other => StreamingError::Network(NetworkError::new(&other)),
            }
        };
        let body = json(&header).map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        let conn = match self.connection(SNAPSHOT_FRAME_TIMEOUT).await {
            Ok(c) => c,
            Err(e) => return Err(to_streaming(self, e)),
        };
        let sent = async {
            within(
                SNAPSHOT_FRAME_TIMEOUT,
                write_frame(conn, Kind::SnapshotBegin, &body),
            )
            .await?;
            let mut crcs = Vec::with_capacity(files.len());
            for (name, len) in &files {
                let crc = send_file(conn, &dir.join(name), *len).await?;
                crcs.push(crc);
            }
            within(
                SNAPSHOT_FRAME_TIMEOUT,
                write_frame(conn, Kind::SnapshotEnd, &json(&crcs)?),
            )
            .await?;
            within(SNAPSHOT_INSTALL_TIMEOUT, read_reply(conn)).await
        }
        .await;
        let reply = match sent {
            Ok(r) => r,
            Err(e) => {
                self.conn = None;
                return Err(to_streaming(self, CallError::Io(e)));
            }
        };
        let result: Result<SnapshotResponse<NodeId>, Fatal<NodeId>> =
            from_json(&reply).map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| StreamingError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// Sends the `len` bytes of the file at `path` in data frames; returns
/// their CRC-32C.
async fn send_file<W: AsyncWrite + Unpin>(w: &mut W, path: &Path, len: u64) -> io::Result<u32> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut left = len;
    let mut crc = 0u32;
    let mut buf = vec![0u8; SNAPSHOT_CHUNK_BYTES];
    while left > 0 {
        let n = left.min(SNAPSHOT_CHUNK_BYTES as u64) as usize;
        file.read_exact(&mut buf[..n]).await?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        within(
            SNAPSHOT_FRAME_TIMEOUT,
            write_frame(w, Kind::SnapshotData, &buf[..n]),
        )
        .await?;
        left -= n as u64;
    }
    Ok(crc)
}

async fn read_reply<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    match read_frame(r).await? {
        Some((Kind::Reply, body)) => Ok(body),
        Some((Kind::Refused, body)) => Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            String::from_utf8_lossy(&body).into_owned(),
        )),
        Some((kind, _)) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {kind:?} frame where a reply was due"),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the peer closed the connection",
        )),
    }
}

impl RaftNetwork<ServerConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<ServerConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        self.rpc(Kind::AppendEntries, RPCTypes::AppendEntries, rpc, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        self.rpc(Kind::Vote, RPCTypes::Vote, rpc, &option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<ServerConfig>,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<ServerConfig, Fatal<NodeId>>> {
        tokio::select! {
            result = self.send_snapshot(vote, &snapshot) => result,
            closed = cancel => {
                // Whatever was half-sent leaves the connection out of step.
                self.conn = None;
                Err(StreamingError::Closed(closed))
            }
        }
    }
}

/// Serves peers' requests on `listener` until the process ends.
pub async fn serve(listener: TcpListener, raft: Raft, hooks: Arc<Hooks>, incoming: PathBuf) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let (raft, hooks, incoming) = (raft.clone(), hooks.clone(), incoming.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve_peer(stream, &raft, &hooks, &incoming).await {
                        log::debug!("raft transport: {e}");
                    }
                });
            }
            Err(e) => {
                log::warn!("raft transport accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn serve_peer(
    stream: TcpStream,
    raft: &Raft,
    hooks: &Hooks,
    incoming: &Path,
) -> io::Result<()> {
    let mut conn = BufStream::new(stream);
    while let Some((kind, body)) = read_frame(&mut conn).await? {
        let reply = match kind {
            Kind::AppendEntries => {
                let req: Envelope<AppendEntriesRequest<ServerConfig>> = from_json(&body)?;
                if hooks.is_cut(req.from) {
                    return Ok(());
                }
                json(&raft.append_entries(req.rpc).await)?
            }
            Kind::Vote => {
                let req: Envelope<VoteRequest<NodeId>> = from_json(&body)?;
                if hooks.is_cut(req.from) {
                    return Ok(());
                }
                json(&raft.vote(req.rpc).await)?
            }
            Kind::SnapshotBegin => {
                let header: SnapshotHeader = from_json(&body)?;
                if hooks.is_cut(header.from) {
                    return Ok(());
                }
                let dir = receive_snapshot(&mut conn, &header, incoming).await?;
                let snapshot = Snapshot {
                    meta: header.meta,
                    snapshot: Box::new(SnapshotDir { path: dir.clone() }),
                };
                let result = raft.install_full_snapshot(header.vote, snapshot).await;
                // Installed, the directory was moved into place; refused
                // (an older snapshot, a stale vote), it is not needed.
                let _ = layout::remove_tree(&dir);
                json(&result)?
            }
            other => {
                let why = format!("a {other:?} frame where a request was due");
                write_frame(&mut conn, Kind::Refused, why.as_bytes()).await?;
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
        };
        write_frame(&mut conn, Kind::Reply, &reply).await?;
    }
    Ok(())
}

/// Receives the files `header` lists into a new directory under
/// `incoming`, checks and syncs them, and returns the directory.
async fn receive_snapshot<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut S,
    header: &SnapshotHeader,
    incoming: &Path,
) -> io::Result<PathBuf> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    if !snapshot::valid_id(&header.meta.snapshot_id) {
        return Err(invalid(format!(
            "snapshot id {:?}",
            header.meta.snapshot_id
        )));
    }
    if let Some((bad, _)) = header.files.iter().find(|(f, _)| !snapshot::valid_file(f)) {
        return Err(invalid(format!("a snapshot file named {bad:?}")));
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = incoming.join(format!("{}-{nanos:x}", header.meta.snapshot_id));
    let result = receive_files(conn, header, &dir).await;
    if result.is_err() {
        let _ = layout::remove_tree(&dir);
    }
    result.map(|()| dir)
}

async fn receive_files<S: AsyncRead + Unpin>(
    conn: &mut S,
    header: &SnapshotHeader,
    dir: &Path,
) -> io::Result<()> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    tokio::fs::create_dir_all(dir.join(snapshot::DB_DIR)).await?;
    let mut crcs = Vec::with_capacity(header.files.len());
    for (name, len) in &header.files {
        let path = dir.join(name);
        let mut file = tokio::fs::File::create(&path).await?;
        let mut left = *len;
        let mut crc = 0u32;
        while left > 0 {
            let (kind, body) = within(SNAPSHOT_FRAME_TIMEOUT, read_frame(conn))
                .await?
                .ok_or_else(|| invalid("the snapshot stream ended early".into()))?;
            if kind != Kind::SnapshotData || body.len() as u64 > left {
                return Err(invalid(format!(
                    "a {kind:?} frame of {} bytes where {left} bytes of {name} were due",
                    body.len()
                )));
            }
            crc = crc32c::crc32c_append(crc, &body);
            file.write_all(&body).await?;
            left -= body.len() as u64;
        }
        file.sync_all().await?;
        crcs.push(crc);
    }
    let (kind, body) = within(SNAPSHOT_FRAME_TIMEOUT, read_frame(conn))
        .await?
        .ok_or_else(|| invalid("the snapshot stream ended early".into()))?;
    if kind != Kind::SnapshotEnd {
        return Err(invalid(format!("a {kind:?} frame where the end was due")));
    }
    let sent: Vec<u32> = from_json(&body)?;
    if sent != crcs {
        return Err(invalid(
            "the snapshot's files do not match their checksums".into(),
        ));
    }
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        layout::sync_dir(&dir.join(snapshot::DB_DIR)).and_then(|()| layout::sync_dir(&dir))
    })
    .await
    .map_err(io::Error::other)?
    .map_err(io::Error::other)
}
