//! One client connection: read bytes, run every complete request, flush the replies once.
//!
//! Requests are executed in order on the connection's task. Storage calls are synchronous:
//! they hit the memtable or block cache almost always, and a task switch per command would
//! cost more than it saves. Replies of a whole pipelined batch are written with one syscall,
//! after one shared WAL sync if `appendfsync always` is on and the batch wrote anything.
//!
//! Consecutive write commands of a pipeline run as one implicit transaction
//! ([`PipelineBatch`]) and reach storage as one write, committed before their replies go out.
//! Writes of different connections to one busy key are combined the same way
//! (`keyspace::combine`), and every commit shares its storage write with those of other
//! connections committing at the same moment (`Keyspace::write_combined`).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use shale_protocol::{ProtocolError, Reply, RequestLimits, RequestParser};
use shale_storage::ReadAhead;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::sync::watch::{self, error::RecvError};

use crate::commands::{
    blocked_route, command_keys, execute, monitored, planned_reads, resolve, CommandSpec, Context,
    Flags, Outcome, PlannedReads, ReplicaWait,
};
use crate::config::FsyncPolicy;
use crate::error::Error;
use crate::keyspace::combine::{Combiner, Entry, Guest, Handback, Leadership};
use crate::keyspace::{HeldStripes, Transaction};
use crate::services::blocking::{BlockRequest, Ending};
use crate::services::cluster::migration;
use crate::services::monitor::Origin;
use crate::services::replication::feed;
use crate::services::{pubsub, ClientState, Closing, Services};

/// Replies are flushed once this much is buffered even if more requests are waiting, so a
/// client that pipelines without reading cannot grow the server's memory.
const OUTPUT_FLUSH_THRESHOLD: usize = 64 * 1024;
const READ_CHUNK: usize = 16 * 1024;
/// A pipeline batch commits after this many commands, so it holds its keys only briefly.
const BATCH_LIMIT: usize = 128;
/// Pipelined reads batched into one read of storage at most: what they read is held in
/// memory until each runs.
const READ_AHEAD_LIMIT: usize = 16;
/// Reads that took longer than this a key waited for the disk: a read from memory takes a few
/// microseconds, one from this machine's disk 40 µs or more.
const DISK_READ: Duration = Duration::from_micros(20);
/// Slow batches in a row after which a connection reads off the worker. One alone may only
/// have lost its core to another thread for a while, which `block_in_place` does not help.
const SLOW_READS_OFF_WORKER: u8 = 2;

pub async fn serve(
    services: Arc<Services>,
    combiner: Arc<WriteCombiner>,
    mut stream: TcpStream,
    addr: SocketAddr,
) {
    services
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let maxclients = services.config.read().maxclients;
    if services.clients.count() >= maxclients {
        services
            .stats
            .connections_rejected
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    let _ = stream.set_nodelay(true);
    let local_addr = stream.local_addr().unwrap_or(addr);
    let handle = services
        .clients
        .register(addr, local_addr, stream.as_raw_fd());
    let (queue, messages) = mpsc::channel(pubsub::QUEUE_LIMIT);
    let subscriber = pubsub::Subscriber {
        client: handle.clone(),
        queue,
        limits: services.output_limits.clone(),
    };
    let client = ClientState::new(
        subscriber,
        services.acl.default_user(),
        services.acl.default_needs_no_password(),
    );
    let mut connection = Connection {
        services: services.clone(),
        combiner,
        stream,
        client,
        messages,
        parser: RequestParser::default(),
        tally: None,
        replica_wait: None,
        unsynced: UnsyncedWrites {
            replies: Vec::new(),
            generation: services.keyspace.engine().generation(),
        },
        latency_samples: Vec::new(),
        slow_reads: 0,
        read_ahead_time: Duration::ZERO,
    };
    let ended = connection.run().await;
    connection.book_tally();
    services
        .pubsub
        .forget(handle.id, &connection.client.subscriptions);
    services.keyspace.unwatch(&mut connection.client.watching);
    services.monitors.remove(handle.id);
    if connection.client.cluster_import_link {
        // The source of an import went away before it ended: what it sent is dropped.
        if let Some(cluster) = &services.cluster {
            if let Some(range) = cluster.import_link_lost() {
                let keyspace = services.keyspace.clone();
                migration::delete_in_background(cluster.clone(), keyspace, range, "failed import");
            }
        }
    }
    match ended {
        // PSYNC: the connection carries a replica's stream from now on, still listed as a
        // client (flag S) so that CLIENT KILL TYPE replica finds it.
        Ok(Some(input)) => {
            let Connection { stream, client, .. } = connection;
            let handshake = client.replica.clone();
            handle.info.lock().replica = true;
            if let Some(request) = handshake.psync {
                feed::serve(
                    services.clone(),
                    stream,
                    input,
                    handle.clone(),
                    handshake.hello,
                    request,
                )
                .await;
            }
        }
        Ok(None) => {}
        Err(err) => tracing::debug!("client {addr}: {err}"),
    }
    services.clients.unregister(handle.id);
}

/// Completes when the client of a waiting command goes away: it closed, the socket failed, or
/// what it sent meanwhile (kept in `input` for later) passed `query_limit`.
async fn gone(stream: &mut TcpStream, input: &mut BytesMut, query_limit: usize) {
    loop {
        input.reserve(READ_CHUNK);
        match stream.read_buf(input).await {
            Ok(read) if read > 0 && input.len() <= query_limit => continue,
            _ => return,
        }
    }
}

/// The next change of a watched value, or never without one.
async fn changed(watched: &mut Option<watch::Receiver<u64>>) -> Option<Result<(), RecvError>> {
    match watched {
        Some(receiver) => Some(receiver.changed().await),
        None => std::future::pending().await,
    }
}

/// Completes after `timeout`, or never: without a timeout no timer is registered at all, and
/// this loop runs once per request.
async fn idle(timeout: Option<Duration>) {
    match timeout {
        Some(timeout) => tokio::time::sleep(timeout).await,
        None => std::future::pending().await,
    }
}

/// What woke a connection up.
enum Wake {
    Read(usize),
    Message(Reply),
}

struct Connection {
    services: Arc<Services>,
    /// Where writes to a busy key wait for its current writer to run them.
    combiner: Arc<WriteCombiner>,
    stream: TcpStream,
    client: ClientState,
    /// Pub/sub messages for this connection.
    messages: mpsc::Receiver<Reply>,
    /// Takes requests off the input buffer, which only the parser consumes.
    parser: RequestParser,
    /// The latest run of calls of one command, not yet in the shared statistics.
    tally: Option<Tally>,
    /// What WAIT left to wait for, taken from its command's context.
    replica_wait: Option<ReplicaWait>,
    unsynced: UnsyncedWrites,
    /// The run-time buffer of the next tally, kept so that tallies do not allocate.
    latency_samples: Vec<u64>,
    /// How many of this connection's last batches of reads in a row were slow enough to have
    /// waited for the disk (see `run_reads`).
    slow_reads: u8,
    /// Time spent reading ahead for the next command, booked as part of its run.
    read_ahead_time: Duration,
}

/// Where the replies of writes lie in the output not sent yet, and the engine's generation
/// when the first of those writes began. Under `appendfsync always`, if their sync fails (or
/// a recovery came between), each of them is replaced by the failure's error: a write whose
/// WAL record may be lost is never acknowledged.
#[derive(Default)]
struct UnsyncedWrites {
    replies: Vec<std::ops::Range<usize>>,
    generation: u64,
}

impl UnsyncedWrites {
    /// Notes the reply at `reply` in `output`, unless it is empty (CLIENT REPLY OFF) or an
    /// error, which acknowledges nothing. (A write queued in MULTI is no write here: its
    /// outcome names no command, so `account` does not count it.)
    fn note(&mut self, output: &[u8], reply: std::ops::Range<usize>) {
        if !matches!(output.get(reply.start), None | Some(b'-') | Some(b'!')) {
            self.replies.push(reply);
        }
    }

    /// The output was cut back to `len` (a batch whose commit failed answers anew).
    fn truncate(&mut self, len: usize) {
        self.replies.retain(|reply| reply.end <= len);
    }

    /// Replaces each write's reply in `output` by `error`.
    fn answer_with(&self, output: &mut BytesMut, error: &Reply, resp3: bool) {
        let mut answered = BytesMut::with_capacity(output.len());
        let mut copied = 0;
        for reply in &self.replies {
            answered.extend_from_slice(&output[copied..reply.start]);
            error.encode(&mut answered, resp3);
            copied = reply.end;
        }
        answered.extend_from_slice(&output[copied..]);
        *output = answered;
    }

    /// The output was sent: what comes next begins in `generation`.
    fn restart(&mut self, generation: u64) {
        self.replies.clear();
        self.generation = generation;
    }
}

/// Calls of one command in a row on one connection, booked in the shared statistics together:
/// a pipeline of sixteen GETs then updates the counters that all worker threads share once
/// instead of sixteen times. Booked before the connection runs any other command, before it
/// sends replies, and at once for commands without keys (INFO, CLIENT, CONFIG read the
/// figures), so a client that got a reply sees its command counted.
struct Tally {
    spec: &'static CommandSpec,
    calls: u64,
    usec: u64,
    failed: u64,
    /// When the last call finished.
    finished: Instant,
    /// Each call's run time, for the command's histogram.
    nanos: Vec<u64>,
}

impl Connection {
    /// Serves requests until the connection closes; returns the unparsed input if it became a
    /// replica's feed (PSYNC).
    async fn run(&mut self) -> std::io::Result<Option<BytesMut>> {
        let mut input = BytesMut::with_capacity(READ_CHUNK);
        let mut output = BytesMut::with_capacity(READ_CHUNK);
        let mut shutdown = self.services.shutdown.subscribe();
        let handle = self.client.handle.clone();
        // Made once and polled on every wake: made afresh each time, they registered with (and
        // left) their notifiers' waiter lists around every request.
        let killed = handle.killed();
        tokio::pin!(killed);
        let stopping = shutdown.wait_for(|&stop| stop);
        tokio::pin!(stopping);
        loop {
            let (idle_timeout, query_limit) = {
                let config = self.services.config.read();
                let timeout = (config.timeout > 0).then(|| Duration::from_secs(config.timeout));
                (timeout, config.client_query_buffer_limit)
            };
            if input.len() > query_limit {
                tracing::warn!(
                    "closing client {}: query buffer over {query_limit} bytes",
                    handle.addr
                );
                return Ok(None);
            }
            if input.is_empty() && input.capacity() > 4 * READ_CHUNK {
                input = BytesMut::with_capacity(READ_CHUNK);
            }
            if output.capacity() > 4 * OUTPUT_FLUSH_THRESHOLD {
                output = BytesMut::with_capacity(READ_CHUNK);
            }
            input.reserve(READ_CHUNK);
            // What CLIENT LIST and INFO show of this connection's buffers.
            handle.buffers.set_query(input.len(), input.capacity());
            handle.buffers.set_output(output.len(), output.capacity());
            let event = tokio::select! {
                read = self.stream.read_buf(&mut input) => Wake::Read(read?),
                Some(message) = self.messages.recv() => Wake::Message(message),
                _ = &mut killed => return Ok(None),
                _ = &mut stopping => return Ok(None),
                _ = idle(idle_timeout) => return Ok(None),
            };
            let read = match event {
                Wake::Read(read) => {
                    handle.buffers.set_query(input.len(), input.capacity());
                    // Messages published before this request arrived go out before its reply,
                    // as Redis writes them at once: a PING after a PUBLISH finds them first.
                    while output.len() < OUTPUT_FLUSH_THRESHOLD {
                        let Ok(message) = self.messages.try_recv() else {
                            break;
                        };
                        self.encode_message(&message, &mut output);
                    }
                    read
                }
                Wake::Message(message) => {
                    self.encode_message(&message, &mut output);
                    while output.len() < OUTPUT_FLUSH_THRESHOLD {
                        let Ok(more) = self.messages.try_recv() else {
                            break;
                        };
                        self.encode_message(&more, &mut output);
                    }
                    self.flush(&mut output, false).await?;
                    continue;
                }
            };
            if read == 0 {
                return Ok(None);
            }
            self.services
                .stats
                .net_input_bytes
                .fetch_add(read as u64, Ordering::Relaxed);
            if !self.process(&mut input, &mut output).await? {
                let handover = self.client.closing == Some(Closing::ToReplica);
                return Ok(handover.then_some(input));
            }
        }
    }

    /// Runs every complete request in `input`. Returns `false` when the connection must close.
    async fn process(
        &mut self,
        input: &mut BytesMut,
        output: &mut BytesMut,
    ) -> std::io::Result<bool> {
        let limits = RequestLimits {
            max_bulk_len: self.services.config.read().proto_max_bulk_len,
            max_multibulk_len: if self.client.authenticated {
                i32::MAX as usize
            } else {
                10
            },
        };
        self.services.pause.wait().await;
        // What these requests write begins now: in this generation of the engine.
        self.unsynced
            .restart(self.services.keyspace.engine().generation());
        let mut wrote = false;
        let mut batch: Option<PipelineBatch> = None;
        // A request parsed while looking for pipelined reads to batch, not yet run.
        let mut pending: Option<Result<Vec<Bytes>, ProtocolError>> = None;
        loop {
            let parsed = match pending.take() {
                Some(parsed) => parsed.map(Some),
                None => self.parser.parse(input, &limits),
            };
            let args = match parsed {
                Ok(Some(args)) if args.is_empty() => continue,
                Ok(Some(args)) => args,
                Ok(None) => break,
                Err(err) => {
                    self.commit_batch(&mut batch, output).await;
                    self.protocol_error(err, output);
                    self.flush(output, wrote).await?;
                    return Ok(false);
                }
            };
            let lockable = self.lockable_keys(&args);
            if let Some((spec, keys)) = &lockable {
                // While clients block, each push must serve them before the next command
                // runs, as in Redis.
                let more = !input.is_empty() && !self.services.keyspace.ready.any_blocked();
                if may_batch(spec)
                    && (more || batch.is_some())
                    && self.join_batch(&mut batch, keys, output.len())
                {
                    wrote |= self
                        .run_command(&args, None, batch.as_mut(), None, output)
                        .0;
                    // A command of the batch that panicked: the batch fails, the connection
                    // closes.
                    if self.client.closing.is_some() {
                        self.commit_batch(&mut batch, output).await;
                        self.flush(output, wrote).await?;
                        return Ok(false);
                    }
                    let full = batch.as_ref().is_some_and(|b| b.commands >= BATCH_LIMIT);
                    if full || output.len() >= OUTPUT_FLUSH_THRESHOLD {
                        self.commit_batch(&mut batch, output).await;
                    }
                    if output.len() >= OUTPUT_FLUSH_THRESHOLD {
                        self.flush(output, wrote).await?;
                        wrote = false;
                    }
                    continue;
                }
            }
            self.commit_batch(&mut batch, output).await;
            let (wrote_now, block) = match lockable {
                Some((spec, keys)) => match self.combinable_stripe(spec, &keys) {
                    Some(stripe) => (self.run_combined(&args, stripe, output).await, None),
                    None if may_batch(spec) => {
                        let held = self.hold_keys(&keys).await;
                        (self.run_alone(&args, held, output).await, None)
                    }
                    None => {
                        let held = self.hold_keys(&keys).await;
                        self.run_command(&args, Some(held), None, None, output)
                    }
                },
                None => match self.read_ahead_spec(&args) {
                    Some(spec) => {
                        pending = self
                            .run_reads(spec, &args, input, &limits, &mut wrote, output)
                            .await?;
                        (false, None)
                    }
                    None => self.run_command(&args, None, None, None, output),
                },
            };
            wrote |= wrote_now;
            if let Some(request) = block {
                // Earlier replies go out before the wait, as Redis sends them.
                self.flush(output, wrote).await?;
                let write = resolve(&args).is_ok_and(|spec| spec.flags.contains(Flags::WRITE));
                match self.wait_blocked(request, write, input).await? {
                    // A served pop wrote, on this client's behalf.
                    Some(reply) => {
                        if let Reply::Error(line) = &reply {
                            // Booked as a call when it blocked; its error comes only now.
                            let stats = &self.services.stats;
                            stats.record_errors(line, 1);
                            if let Ok(spec) = resolve(&args) {
                                stats.record_failure(spec.index());
                            }
                        }
                        // Its reply was held back until now, and so was CLIENT REPLY's verdict.
                        let from = output.len();
                        if self.client.replies.finish_command() {
                            reply.encode(output, self.client.resp3);
                        }
                        self.unsynced.note(output, from..output.len());
                        wrote = true;
                    }
                    None => return Ok(false),
                }
            }
            if let Some(wait) = self.replica_wait.take() {
                // Earlier replies go out before the wait.
                self.flush(output, wrote).await?;
                match self.wait_replicas(wait, input).await {
                    Some(reply) => {
                        if self.client.replies.finish_command() {
                            reply.encode(output, self.client.resp3);
                        }
                        wrote = true;
                    }
                    None => return Ok(false),
                }
            }
            match self.client.closing {
                Some(Closing::Immediately) => return Ok(false),
                Some(Closing::AfterReply) | Some(Closing::ToReplica) => {
                    self.flush(output, wrote).await?;
                    return Ok(false);
                }
                None => {}
            }
            if output.len() >= OUTPUT_FLUSH_THRESHOLD {
                self.flush(output, wrote).await?;
                wrote = false;
            }
        }
        self.commit_batch(&mut batch, output).await;
        self.flush(output, wrote).await?;
        Ok(true)
    }

    /// The command table entry of `args` if it is a GET, HGET or MGET from a client that runs
    /// commands as they come, which [`Connection::run_reads`] runs.
    fn read_ahead_spec(&self, args: &[Bytes]) -> Option<&'static CommandSpec> {
        let client = &self.client;
        if client.multi.is_some() || !client.authenticated || !client.subscriptions.is_empty() {
            return None;
        }
        resolve(args)
            .ok()
            .filter(|spec| planned_reads(spec, args).is_some())
    }

    /// Runs `first` (a GET, HGET or MGET) and, after a GET or HGET, the GETs and HGETs that
    /// follow it in `input` (up to [`READ_AHEAD_LIMIT`]). The records of such a run, or of
    /// any of them once reads wait for the disk, are read in one batch per family before the
    /// first command runs. `wrote` says whether the replies in `output` include a write's,
    /// as in `process`. Returns the request parsed after them, which the caller runs next.
    ///
    /// Reads that wait for the disk hold the thread they run on, and each worker thread runs
    /// one at a time: two workers would keep two reads in flight. So once a connection's reads
    /// took longer than [`DISK_READ`] a key [`SLOW_READS_OFF_WORKER`] times in a row, its next
    /// batches are read off the worker (`block_in_place`, the worker's other connections
    /// moving to another thread), and the reads of many connections are in flight together,
    /// until a batch is fast again.
    async fn run_reads(
        &mut self,
        first_spec: &'static CommandSpec,
        first: &[Bytes],
        input: &mut BytesMut,
        limits: &RequestLimits,
        wrote: &mut bool,
        output: &mut BytesMut,
    ) -> std::io::Result<Option<Result<Vec<Bytes>, ProtocolError>>> {
        let mut reads = Vec::new();
        let mut next = None;
        let runs_on = matches!(planned_reads(first_spec, first), Some(PlannedReads::One(_)));
        while runs_on && reads.len() + 1 < READ_AHEAD_LIMIT {
            match self.parser.parse(input, limits) {
                Ok(None) => break,
                Ok(Some(args)) if args.is_empty() => continue,
                Ok(Some(args)) => match one_read_spec(&args) {
                    Some(spec) => reads.push((args, spec)),
                    None => {
                        next = Some(Ok(args));
                        break;
                    }
                },
                Err(err) => {
                    next = Some(Err(err));
                    break;
                }
            }
        }
        let commands = || {
            std::iter::once((first, first_spec))
                .chain(reads.iter().map(|(args, spec)| (args.as_slice(), *spec)))
        };
        let plans = || commands().filter_map(|(args, spec)| planned_reads(spec, args));
        let started = Instant::now();
        let keys: usize = plans().map(|planned| planned.keys()).sum();
        let keyspace = &self.services.keyspace;
        let off_worker = self.slow_reads >= SLOW_READS_OFF_WORKER;
        let ahead = (off_worker || !reads.is_empty()).then(|| keyspace.read_ahead());
        if let Some(ahead) = &ahead {
            let mut planned = Vec::with_capacity(keys);
            plans().for_each(|reads| reads.add_to(&mut planned));
            let db = keyspace.db(self.client.db);
            let read = if off_worker {
                tokio::task::block_in_place(|| db.read_ahead(ahead, &planned))
            } else {
                db.read_ahead(ahead, &planned)
            };
            // A failed batch leaves each command to read, and fail, on its own.
            if let Err(err) = read {
                tracing::debug!("reads not batched: {err}");
            }
        }
        let mut took = started.elapsed();
        // The first command's statistics (and slow log entry) carry the batch's read.
        self.read_ahead_time = took;
        for (args, _) in commands() {
            let started = Instant::now();
            *wrote |= self.run_command(args, None, None, ahead.as_ref(), output).0;
            took += started.elapsed();
            if self.client.closing.is_some() {
                return Ok(None);
            }
            if output.len() >= OUTPUT_FLUSH_THRESHOLD {
                self.flush(output, *wrote).await?;
                *wrote = false;
            }
        }
        self.slow_reads = if took > DISK_READ * keys as u32 {
            self.slow_reads.saturating_add(1)
        } else {
            0
        };
        Ok(next)
    }

    /// Adds a command with `keys` to the open batch, opening one if needed; `false` if one of
    /// its keys is busy (the command then runs on its own, after the batch commits).
    fn join_batch(
        &self,
        batch: &mut Option<PipelineBatch>,
        keys: &[&[u8]],
        replies_from: usize,
    ) -> bool {
        let keyspace = &self.services.keyspace;
        if batch.is_none() {
            let Ok(txn) = keyspace.begin(&[]) else {
                return false;
            };
            *batch = Some(PipelineBatch::new(txn, replies_from));
        }
        batch
            .as_ref()
            .is_some_and(|b| keyspace.try_hold_in(&b.txn, self.client.db, keys))
    }

    /// Commits the open batch, if any, and then serves the clients its writes unblocked. If
    /// the commit fails, none of its writes happened: each of its commands gets the error
    /// instead of its reply, which is also returned.
    async fn commit_batch(
        &mut self,
        batch: &mut Option<PipelineBatch>,
        output: &mut BytesMut,
    ) -> Option<Reply> {
        let batch = batch.take()?;
        let services = &self.services;
        let failure = match services.keyspace.commit_combined(&batch.txn).await {
            Ok(()) => {
                services.notifications().publish_all(batch.events);
                None
            }
            Err(err) => {
                output.truncate(batch.replies_from);
                self.unsynced.truncate(batch.replies_from);
                let reply = err.to_reply();
                if let Reply::Error(line) = &reply {
                    services.stats.record_errors(line, batch.commands as u64);
                }
                for _ in 0..batch.answered {
                    reply.encode(output, self.client.resp3);
                }
                Some(reply)
            }
        };
        drop(batch.txn);
        services.blocking.serve_ready(&services.keyspace);
        failure
    }

    /// The stripe on which a write command may be combined with other connections' writes:
    /// one that every key of the command shares. Blocking commands never combine, and nothing
    /// does while clients block on keys, as each push must serve them before the next runs.
    fn combinable_stripe(&self, spec: &CommandSpec, keys: &[&[u8]]) -> Option<usize> {
        let keyspace = &self.services.keyspace;
        if !may_batch(spec) || keyspace.ready.any_blocked() {
            return None;
        }
        keyspace.shared_stripe(self.client.db, keys)
    }

    /// Runs a write on a stripe's combiner: as its leader, together with the writes queued
    /// meanwhile, or as a guest whose write the current leader runs. Returns whether it wrote.
    async fn run_combined(&mut self, args: &[Bytes], stripe: usize, output: &mut BytesMut) -> bool {
        let services = self.services.clone();
        let combiner = self.combiner.clone();
        let entry = combiner.enter(stripe, || GuestCommand {
            args: args.to_vec(),
            client: self.client.stand_in(),
        });
        let leadership = match entry {
            Entry::Lead(leadership) => leadership,
            Entry::Queued(handback) => match handback.await {
                Ok(Handback::Ran(ran)) => {
                    let combined = &services.stats.combined_writes;
                    combined.fetch_add(1, Ordering::Relaxed);
                    let from = output.len();
                    if self.client.replies.finish_command() {
                        ran.outcome.reply.encode(output, self.client.resp3);
                    }
                    let wrote = self.account(args, &ran.outcome, ran.elapsed, Instant::now());
                    if wrote {
                        self.unsynced.note(output, from..output.len());
                    }
                    return wrote;
                }
                Ok(Handback::Lead(leadership, _)) => leadership,
                Err(_) => {
                    // Only a leader that died mid-round drops a guest unanswered; whether the
                    // write committed is unknown, so it must not run again.
                    let err = Error::msg("the write was lost with the connection running it");
                    if self.client.replies.finish_command() {
                        err.to_reply().encode(output, self.client.resp3);
                    }
                    return true;
                }
            },
        };
        self.lead(leadership, args, stripe, output).await
    }

    /// Runs this connection's write and every guest's queued so far as one transaction, then
    /// hands the guests their outcomes. Alone, the write runs as a batch of one.
    async fn lead(
        &mut self,
        leadership: Leadership<GuestCommand, GuestOutcome>,
        args: &[Bytes],
        stripe: usize,
        output: &mut BytesMut,
    ) -> bool {
        let held = self.services.keyspace.hold_stripe(stripe).await;
        let guests = leadership.take_guests();
        let services = self.services.clone();
        let keyspace = &services.keyspace;
        let mut batch = PipelineBatch::new(keyspace.begin_holding(held), output.len());
        let wrote = self
            .run_command(args, None, Some(&mut batch), None, output)
            .0;
        let mut ran = Vec::with_capacity(guests.len());
        for Guest { job, handback } in guests {
            let GuestCommand { args, mut client } = job;
            let started = Instant::now();
            let mut ctx = Context::new(&services, &mut client, Some(&*batch.txn), None);
            let outcome = execute(&mut ctx, &args);
            batch.events.append(&mut ctx.events);
            let elapsed = started.elapsed();
            ran.push((handback, GuestOutcome { outcome, elapsed }));
        }
        let failure = self.commit_batch(&mut Some(batch), output).await;
        for (handback, mut ran) in ran {
            if let Some(reply) = &failure {
                ran.outcome.reply = reply.clone();
            }
            let _ = handback.send(Handback::Ran(ran));
        }
        wrote
    }

    /// Runs a write that may batch on its own, in a batch of one: its storage write then
    /// joins those of other connections. Returns whether it wrote.
    async fn run_alone(
        &mut self,
        args: &[Bytes],
        held: HeldStripes,
        output: &mut BytesMut,
    ) -> bool {
        let txn = self.services.keyspace.begin_holding(held);
        let mut batch = PipelineBatch::new(txn, output.len());
        let wrote = self
            .run_command(args, None, Some(&mut batch), None, output)
            .0;
        self.commit_batch(&mut Some(batch), output).await;
        wrote
    }

    /// Blocks until a blocking command's wait ends: served, timed out, unblocked, ended by its
    /// keys' new state, by this server becoming a replica or by its keys' slots moving away.
    /// Meanwhile it keeps reading, to notice a client that goes away; `None` when the
    /// connection must close without a reply.
    async fn wait_blocked(
        &mut self,
        request: BlockRequest,
        write: bool,
        input: &mut BytesMut,
    ) -> std::io::Result<Option<Reply>> {
        let services = self.services.clone();
        let keyspace = &services.keyspace;
        let blocking = &services.blocking;
        let mut masters = services.replication.master_changes();
        masters.mark_unchanged();
        let mut topologies = services.cluster.as_ref().map(|cluster| cluster.changes());
        let timeout_reply = request.timeout_reply.clone();
        let waiter = blocking.block(keyspace, self.client.handle.clone(), request);
        let query_limit = services.config.read().client_query_buffer_limit;
        let mut shutdown = services.shutdown.subscribe();
        let handle = self.client.handle.clone();
        let gone = gone(&mut self.stream, input, query_limit);
        tokio::pin!(gone);
        loop {
            tokio::select! {
                ending = blocking.wait(keyspace, &waiter) => {
                    return Ok(Some(match ending {
                        Ending::TimedOut => timeout_reply,
                        Ending::Reply { reply, close } => {
                            if close {
                                self.client.closing = Some(Closing::AfterReply);
                            }
                            reply
                        }
                    }));
                }
                Ok(()) = masters.changed() => {
                    if masters.borrow_and_update().is_some() {
                        blocking.end(&waiter, Ending::role_changed());
                    }
                }
                Some(Ok(())) = changed(&mut topologies) => {
                    let cluster = services.cluster.as_deref();
                    let routed = cluster.map_or(Ok(()), |cluster| {
                        blocked_route(cluster, &self.client, waiter.keys(), write)
                    });
                    if let Err(err) = routed {
                        let reply = err.to_reply();
                        blocking.end(&waiter, Ending::Reply { reply, close: false });
                    }
                }
                _ = &mut gone => break,
                _ = handle.killed() => break,
                _ = shutdown.wait_for(|&stop| stop) => break,
            }
        }
        blocking.finish(keyspace, &waiter);
        Ok(None)
    }

    /// Waits until `wait.needed` replicas acknowledged `wait.offset` or its timeout passed and
    /// answers how many did, or ends the wait with an error when this server becomes a
    /// replica or CLIENT UNBLOCK says so; `None` if the connection closed meanwhile.
    async fn wait_replicas(&mut self, wait: ReplicaWait, input: &mut BytesMut) -> Option<Reply> {
        let services = self.services.clone();
        let (keyspace, blocking) = (&services.keyspace, &services.blocking);
        let replication = &services.replication;
        let mut masters = replication.master_changes();
        masters.mark_unchanged();
        let waiter = blocking.block_on_replicas(self.client.handle.clone(), wait.timeout);
        let query_limit = services.config.read().client_query_buffer_limit;
        let gone = gone(&mut self.stream, input, query_limit);
        tokio::pin!(gone);
        let enough = async {
            loop {
                let acked = replication.acked.notified();
                if replication.acknowledged(wait.offset) >= wait.needed {
                    return;
                }
                acked.await;
            }
        };
        tokio::pin!(enough);
        let handle = self.client.handle.clone();
        let mut shutdown = services.shutdown.subscribe();
        let ending = loop {
            tokio::select! {
                ending = blocking.wait(keyspace, &waiter) => break ending,
                _ = &mut enough => break blocking.finish(keyspace, &waiter),
                Ok(()) = masters.changed() => {
                    if masters.borrow_and_update().is_some() {
                        blocking.end(&waiter, Ending::role_changed());
                    }
                    continue;
                }
                _ = &mut gone => {}
                _ = handle.killed() => {}
                _ = shutdown.wait_for(|&stop| stop) => {}
            }
            blocking.finish(keyspace, &waiter);
            return None;
        };
        Some(match ending {
            Ending::TimedOut => Reply::Integer(replication.acknowledged(wait.offset) as i64),
            Ending::Reply { reply, close } => {
                if close {
                    self.client.closing = Some(Closing::AfterReply);
                }
                reply
            }
        })
    }

    /// The keys of a write command that the connection locks before it runs, or `None` for
    /// every other command, which locks (if at all) as it runs.
    fn lockable_keys<'a>(
        &self,
        args: &'a [Bytes],
    ) -> Option<(&'static CommandSpec, Vec<&'a [u8]>)> {
        // A client that may not run the command locks nothing on its behalf.
        let client = &self.client;
        if client.multi.is_some() || !client.authenticated || !client.subscriptions.is_empty() {
            return None;
        }
        let spec = resolve(args).ok()?;
        if !spec.flags.contains(Flags::WRITE) || spec.flags.contains(Flags::RUNS_COMMANDS) {
            return None;
        }
        // MOVE and COPY ... DB also lock a key of another database; they lock all their keys
        // together, in order, as they run.
        if spec.flags.contains(Flags::LOCKS_LATE) {
            return None;
        }
        let keys = command_keys(spec, args);
        (!keys.is_empty()).then_some((spec, keys))
    }

    /// Locks a write command's keys before it runs, suspending this task (not the worker
    /// thread) while another client holds one: a hot key then costs waiting clients no thread
    /// switches.
    async fn hold_keys(&self, keys: &[&[u8]]) -> HeldStripes {
        let keyspace = &self.services.keyspace;
        keyspace.hold_for_command(self.client.db, keys).await
    }

    /// Executes one command, in `batch` if given, and appends its reply; returns whether it
    /// was a write, and what to wait for if it blocks (then it appends no reply).
    fn run_command(
        &mut self,
        args: &[Bytes],
        held: Option<HeldStripes>,
        batch: Option<&mut PipelineBatch>,
        ahead: Option<&ReadAhead>,
        output: &mut BytesMut,
    ) -> (bool, Option<BlockRequest>) {
        if self
            .tally
            .as_ref()
            .is_some_and(|t| !t.spec.name.as_bytes().eq_ignore_ascii_case(&args[0]))
        {
            self.book_tally();
        }
        let services = self.services.clone();
        let started = Instant::now();
        let txn = batch.as_deref().map(|b| &*b.txn);
        let mut ctx = Context::new(&services, &mut self.client, txn, held.as_ref());
        ctx.read_ahead = ahead;
        let outcome = execute(&mut ctx, args);
        let block = ctx.block.take();
        self.replica_wait = ctx.replica_wait.take();
        let events = std::mem::take(&mut ctx.events);
        // A blocked command's reply, and so CLIENT REPLY's verdict on it, comes after its wait.
        let answered =
            block.is_none() && self.replica_wait.is_none() && self.client.replies.finish_command();
        match batch {
            Some(batch) => {
                batch.events.extend(events);
                batch.commands += 1;
                batch.answered += usize::from(answered);
            }
            None => {
                // Released before blocked clients are served: serving locks their keys.
                drop(held);
                services.blocking.serve_ready(&services.keyspace);
            }
        }
        let finished = Instant::now();
        let elapsed = finished.duration_since(started) + std::mem::take(&mut self.read_ahead_time);
        let from = output.len();
        if answered || (block.is_none() && is_push(&outcome.reply)) {
            outcome.reply.encode(output, self.client.resp3);
        }
        let wrote = self.account(args, &outcome, elapsed, finished);
        if wrote {
            self.unsynced.note(output, from..output.len());
        }
        (wrote, block)
    }

    /// Books a command that ran for `elapsed` until `finished`: statistics, latencies, the slow log,
    /// and the dirty flag of writes. Returns whether it was a write.
    fn account(
        &mut self,
        args: &[Bytes],
        outcome: &Outcome,
        elapsed: Duration,
        finished: Instant,
    ) -> bool {
        let failed = outcome.reply.is_error();
        outcome.count_error(&self.services.stats);
        let Some(spec) = outcome.spec else {
            return false;
        };
        if outcome.rejected {
            self.services.stats.record_rejected(spec.index());
            return false;
        }
        if monitored(spec) {
            let origin = Origin::Client(self.client.handle.addr);
            self.services.monitors.feed(self.client.db, origin, args);
        }
        let usec = elapsed.as_micros() as u64;
        match &mut self.tally {
            Some(tally) if std::ptr::eq(tally.spec, spec) => {
                tally.calls += 1;
                tally.usec += usec;
                tally.failed += failed as u64;
                tally.finished = finished;
            }
            _ => {
                self.book_tally();
                self.tally = Some(Tally {
                    spec,
                    calls: 1,
                    usec,
                    failed: failed as u64,
                    finished,
                    nanos: std::mem::take(&mut self.latency_samples),
                });
            }
        }
        if let Some(tally) = &mut self.tally {
            if self.services.latencies.enabled() {
                tally.nanos.push(elapsed.as_nanos() as u64);
            }
        }
        let event = if spec.flags.contains(Flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        self.services.latency_monitor.note(event, elapsed);
        if spec.keys.reported().0 <= 0 {
            // Commands without keys (INFO, CLIENT, CONFIG, ...) may read these statistics, so
            // their own calls are booked at once, as the next one expects to see them.
            self.book_tally();
        }
        let services = &self.services;
        if services.slowlog.is_slow(usec) {
            let name = self
                .client
                .handle
                .info
                .lock()
                .name
                .clone()
                .unwrap_or_default();
            services.slowlog.push(
                args,
                usec,
                self.client.handle.addr.to_string(),
                String::from_utf8_lossy(&name).into_owned(),
            );
        }
        let is_write = spec.flags.contains(Flags::WRITE)
            || spec.flags.contains(Flags::RUNS_COMMANDS)
            || spec.flags.contains(Flags::MAY_WRITE);
        if is_write {
            services.durability.mark_dirty();
        }
        is_write
    }

    /// Puts the tally into the shared statistics and the client's last command.
    fn book_tally(&mut self) {
        let Some(mut tally) = self.tally.take() else {
            return;
        };
        let stats = &self.services.stats;
        stats.record_calls(tally.spec.index(), tally.calls, tally.usec, tally.failed);
        for nanos in tally.nanos.drain(..) {
            self.services.latencies.record(tally.spec.index(), nanos);
        }
        // The buffer is kept for the next tally.
        self.latency_samples = tally.nanos;
        let handle = &self.client.handle;
        handle.touch(tally.spec.name, self.client.db, tally.finished);
    }

    fn protocol_error(&self, err: ProtocolError, output: &mut BytesMut) {
        tracing::debug!("client {}: {err}", self.client.handle.addr);
        Reply::Error(format!("ERR {err}").into()).encode(output, self.client.resp3);
    }

    /// Writes buffered replies, after the WAL sync that `appendfsync always` requires.
    async fn flush(&mut self, output: &mut BytesMut, wrote: bool) -> std::io::Result<()> {
        self.book_tally();
        if output.is_empty() {
            self.unsynced
                .restart(self.services.keyspace.engine().generation());
            return Ok(());
        }
        if wrote && self.services.durability.policy() == FsyncPolicy::Always {
            let durability = &self.services.durability;
            if let Err(err) = durability.wait_synced(self.unsynced.generation).await {
                let error = Error::from(err).to_reply();
                if let Reply::Error(line) = &error {
                    let writes = self.unsynced.replies.len() as u64;
                    self.services.stats.record_errors(line, writes);
                }
                self.unsynced.answer_with(output, &error, self.client.resp3);
            }
        }
        let handle = &self.client.handle;
        handle.buffers.set_output(output.len(), output.capacity());
        // A client killed while its socket is full (a subscriber over its output limit) is
        // closed now, not once it reads.
        tokio::select! {
            biased;
            written = self.stream.write_all(output) => written?,
            _ = handle.killed() => {
                return Err(std::io::Error::other("killed while its output waited"));
            }
        }
        self.services
            .stats
            .net_output_bytes
            .fetch_add(output.len() as u64, Ordering::Relaxed);
        output.clear();
        handle.buffers.set_output(0, output.capacity());
        self.unsynced
            .restart(self.services.keyspace.engine().generation());
        Ok(())
    }

    /// Adds a queued pub/sub message or MONITOR line to the replies.
    fn encode_message(&self, message: &Reply, output: &mut BytesMut) {
        let gauges = &self.client.handle.buffers;
        gauges.message_taken(message.payload_len());
        if !self.client.replies.is_off() || is_push(message) {
            message.encode(output, self.client.resp3);
        }
    }
}

/// Write commands of one pipeline, run as one implicit transaction: each reads what the
/// earlier ones wrote, and all reach storage as one write, so RocksDB's costs per write (the
/// WAL record, the hand-off between writing threads) are paid once. It only ever takes free
/// stripes, so it cannot deadlock; a command whose key is busy commits the batch and runs on
/// its own. Other clients see none of its writes until the commit, which comes before any of
/// its replies are sent. No batch starts while a client blocks on a key.
struct PipelineBatch {
    /// Boxed: a batch lives in several nested futures of a write (the connection's, the
    /// leader's, the commit's), and each future is copied whole when it starts.
    txn: Box<Transaction>,
    /// Keyspace events of its commands, published after the commit.
    events: Vec<crate::services::notifications::Event>,
    /// Where its commands' replies begin in the output buffer.
    replies_from: usize,
    commands: usize,
    /// Those of its commands whose replies are sent (see CLIENT REPLY).
    answered: usize,
}

impl PipelineBatch {
    /// An empty batch in `txn`, whose replies will begin at `replies_from` in the output.
    fn new(txn: Transaction, replies_from: usize) -> Self {
        PipelineBatch {
            txn: Box::new(txn),
            events: Vec::new(),
            replies_from,
            commands: 0,
            answered: 0,
        }
    }
}

/// A write that a stripe's leader runs for another connection, with a stand-in of that
/// connection's state.
pub(crate) struct GuestCommand {
    args: Vec<Bytes>,
    client: ClientState,
}

/// A guest's outcome, and how long its command ran in µs.
pub(crate) struct GuestOutcome {
    outcome: Outcome,
    elapsed: Duration,
}

pub(crate) type WriteCombiner = Combiner<GuestCommand, GuestOutcome>;

/// Pub/sub messages and subscription confirmations, which Redis sends whatever CLIENT REPLY
/// says (MONITOR lines it does not).
fn is_push(reply: &Reply) -> bool {
    match reply {
        Reply::Push(_) => true,
        Reply::Sequence(replies) => replies.iter().all(is_push),
        _ => false,
    }
}

/// The command table entry of a request that reads one planned record (GET, HGET), which
/// may join a run of reads.
fn one_read_spec(args: &[Bytes]) -> Option<&'static CommandSpec> {
    resolve(args)
        .ok()
        .filter(|spec| matches!(planned_reads(spec, args), Some(PlannedReads::One(_))))
}

/// Whether a write command may join a pipeline batch: not one that blocks, which in a
/// transaction would not.
fn may_batch(spec: &CommandSpec) -> bool {
    !spec.flags.contains(Flags::BLOCKING)
}
