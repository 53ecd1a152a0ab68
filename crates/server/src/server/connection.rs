//! One client connection: read bytes, run every complete request, flush the replies once.
//!
//! Requests are executed in order on the connection's task. Storage calls are synchronous:
//! they hit the memtable or block cache almost always, and a task switch per command would
//! cost more than it saves. Replies of a whole pipelined batch are written with one syscall,
//! after one shared WAL sync if `appendfsync always` is on and the batch wrote anything.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use shale_protocol::{parse_request, ProtocolError, Reply, RequestLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::blocking::BlockRequest;
use super::{pubsub, ClientState, Closing, Services};
use crate::commands::{command_keys, execute, lookup, Context, Flags};
use crate::config::FsyncPolicy;
use crate::types::HeldStripes;

/// Replies are flushed once this much is buffered even if more requests are waiting, so a
/// client that pipelines without reading cannot grow the server's memory.
const OUTPUT_FLUSH_THRESHOLD: usize = 64 * 1024;
const READ_CHUNK: usize = 16 * 1024;

pub async fn serve(services: Arc<Services>, mut stream: TcpStream, addr: SocketAddr) {
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
    let handle = services.clients.register(addr, local_addr);
    let (queue, messages) = mpsc::channel(pubsub::QUEUE_LIMIT);
    let client = ClientState {
        db: 0,
        resp3: false,
        authenticated: services.config.read().requirepass.is_none(),
        handle: handle.clone(),
        closing: None,
        subscriptions: Default::default(),
        subscriber: pubsub::Subscriber {
            client: handle.clone(),
            queue,
        },
        multi: None,
        watching: Default::default(),
    };
    let mut connection = Connection {
        services: services.clone(),
        stream,
        client,
        messages,
    };
    if let Err(err) = connection.run().await {
        tracing::debug!("client {addr}: {err}");
    }
    services
        .pubsub
        .forget(handle.id, &connection.client.subscriptions);
    services.keyspace.unwatch(&mut connection.client.watching);
    services.clients.unregister(handle.id);
}

/// Keeps `client_buffers` in INFO in step with this connection's buffers.
struct BufferAccount<'a> {
    services: &'a Services,
    reported: usize,
}

impl<'a> BufferAccount<'a> {
    fn new(services: &'a Services) -> Self {
        BufferAccount {
            services,
            reported: 0,
        }
    }

    fn update(&mut self, bytes: usize) {
        let counter = &self.services.stats.client_buffers;
        if bytes > self.reported {
            counter.fetch_add((bytes - self.reported) as u64, Ordering::Relaxed);
        } else {
            counter.fetch_sub((self.reported - bytes) as u64, Ordering::Relaxed);
        }
        self.reported = bytes;
    }
}

impl Drop for BufferAccount<'_> {
    fn drop(&mut self) {
        self.update(0);
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
enum Event {
    Read(usize),
    Message(Reply),
}

struct Connection {
    services: Arc<Services>,
    stream: TcpStream,
    client: ClientState,
    /// Pub/sub messages for this connection.
    messages: mpsc::Receiver<Reply>,
}

impl Connection {
    async fn run(&mut self) -> std::io::Result<()> {
        let mut input = BytesMut::with_capacity(READ_CHUNK);
        let mut output = BytesMut::with_capacity(READ_CHUNK);
        let mut shutdown = self.services.shutdown.subscribe();
        let handle = self.client.handle.clone();
        let services = self.services.clone();
        let mut buffers = BufferAccount::new(&services);
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
                return Ok(());
            }
            if input.is_empty() && input.capacity() > 4 * READ_CHUNK {
                input = BytesMut::with_capacity(READ_CHUNK);
            }
            if output.capacity() > 4 * OUTPUT_FLUSH_THRESHOLD {
                output = BytesMut::with_capacity(READ_CHUNK);
            }
            input.reserve(READ_CHUNK);
            buffers.update(input.capacity() + output.capacity());
            let event = tokio::select! {
                read = self.stream.read_buf(&mut input) => Event::Read(read?),
                Some(message) = self.messages.recv() => Event::Message(message),
                _ = handle.killed() => return Ok(()),
                _ = shutdown.wait_for(|&stop| stop) => return Ok(()),
                _ = idle(idle_timeout) => return Ok(()),
            };
            let read = match event {
                Event::Read(read) => read,
                Event::Message(message) => {
                    message.encode(&mut output, self.client.resp3);
                    while output.len() < OUTPUT_FLUSH_THRESHOLD {
                        let Ok(more) = self.messages.try_recv() else {
                            break;
                        };
                        more.encode(&mut output, self.client.resp3);
                    }
                    self.flush(&mut output, false).await?;
                    continue;
                }
            };
            if read == 0 {
                return Ok(());
            }
            self.services
                .stats
                .net_input_bytes
                .fetch_add(read as u64, Ordering::Relaxed);
            if !self.process(&mut input, &mut output).await? {
                return Ok(());
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
        let mut wrote = false;
        loop {
            let args = match parse_request(input, &limits) {
                Ok(Some(args)) if args.is_empty() => continue,
                Ok(Some(args)) => args,
                Ok(None) => break,
                Err(err) => {
                    self.protocol_error(err, output);
                    self.flush(output, wrote).await?;
                    return Ok(false);
                }
            };
            let held = self.hold_keys(&args).await;
            let (wrote_now, block) = self.run_command(&args, held, output);
            wrote |= wrote_now;
            if let Some(request) = block {
                // Earlier replies go out before the wait, as Redis sends them.
                self.flush(output, wrote).await?;
                match self.wait_blocked(request, input).await? {
                    // A served pop wrote, on this client's behalf.
                    Some(reply) => {
                        reply.encode(output, self.client.resp3);
                        wrote = true;
                    }
                    None => return Ok(false),
                }
            }
            match self.client.closing {
                Some(Closing::Immediately) => return Ok(false),
                Some(Closing::AfterReply) => {
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
        self.flush(output, wrote).await?;
        Ok(true)
    }

    /// Blocks until a blocking command is served, times out or is unblocked. Meanwhile it
    /// keeps reading, to notice a client that goes away; `None` when the connection must close.
    async fn wait_blocked(
        &mut self,
        request: BlockRequest,
        input: &mut BytesMut,
    ) -> std::io::Result<Option<Reply>> {
        let services = self.services.clone();
        let keyspace = &services.keyspace;
        let waiter = services
            .blocking
            .block(keyspace, self.client.handle.id, request);
        let query_limit = services.config.read().client_query_buffer_limit;
        let mut shutdown = services.shutdown.subscribe();
        let handle = self.client.handle.clone();
        let stream = &mut self.stream;
        let gone = async {
            loop {
                input.reserve(READ_CHUNK);
                match stream.read_buf(input).await {
                    Ok(read) if read > 0 && input.len() <= query_limit => continue,
                    _ => return,
                }
            }
        };
        tokio::select! {
            reply = services.blocking.wait(keyspace, &waiter) => Ok(Some(reply)),
            _ = gone => {
                services.blocking.finish(keyspace, &waiter);
                Ok(None)
            }
            _ = handle.killed() => {
                services.blocking.finish(keyspace, &waiter);
                Ok(None)
            }
            _ = shutdown.wait_for(|&stop| stop) => {
                services.blocking.finish(keyspace, &waiter);
                Ok(None)
            }
        }
    }

    /// Locks the keys of a write command before it runs, suspending this task (not the
    /// worker thread) while another client holds one: a hot key then costs waiting clients no
    /// thread switches. `None` for every other command, which locks (if at all) as it runs.
    async fn hold_keys(&self, args: &[Bytes]) -> Option<HeldStripes> {
        // A client that may not run the command locks nothing on its behalf.
        let client = &self.client;
        if client.multi.is_some() || !client.authenticated || !client.subscriptions.is_empty() {
            return None;
        }
        let spec = lookup(&args[0])?;
        if !spec.flags.contains(Flags::WRITE) || spec.flags.contains(Flags::RUNS_COMMANDS) {
            return None;
        }
        // MOVE and COPY ... DB also lock a key of another database; they lock all their keys
        // together, in order, as they run.
        if matches!(spec.name, "move" | "copy") {
            return None;
        }
        let keys = command_keys(spec, args);
        if keys.is_empty() {
            return None;
        }
        let keyspace = &self.services.keyspace;
        Some(keyspace.hold_for_command(client.db, &keys).await)
    }

    /// Executes one command and appends its reply; returns whether it was a write, and what
    /// to wait for if it blocks (then it appends no reply).
    fn run_command(
        &mut self,
        args: &[Bytes],
        held: Option<HeldStripes>,
        output: &mut BytesMut,
    ) -> (bool, Option<BlockRequest>) {
        let services = self.services.clone();
        let started = Instant::now();
        let mut ctx = Context {
            keyspace: &services.keyspace,
            client: &mut self.client,
            services: &services,
            txn: None,
            held: held.as_ref(),
            block: None,
            written: Default::default(),
            events: Vec::new(),
        };
        let outcome = execute(&mut ctx, args);
        let block = ctx.block.take();
        // Released before blocked clients are served: serving locks their keys.
        drop(held);
        services.blocking.serve_ready(&services.keyspace);
        let elapsed = started.elapsed().as_micros() as u64;
        if block.is_none() {
            outcome.reply.encode(output, self.client.resp3);
        }
        let failed = outcome.reply.is_error();
        if failed {
            services.stats.error_replies.fetch_add(1, Ordering::Relaxed);
        }
        let Some(spec) = outcome.spec else {
            return (false, block);
        };
        self.client.handle.touch(spec.name, self.client.db);
        services.stats.record(spec.name, elapsed, failed, false);
        let (threshold, max_len) = {
            let config = services.config.read();
            (config.slowlog_log_slower_than, config.slowlog_max_len)
        };
        if threshold >= 0 && elapsed >= threshold as u64 {
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
                elapsed,
                self.client.handle.addr.to_string(),
                String::from_utf8_lossy(&name).into_owned(),
                max_len,
            );
        }
        let is_write =
            spec.flags.contains(Flags::WRITE) || spec.flags.contains(Flags::RUNS_COMMANDS);
        if is_write {
            services.durability.mark_dirty();
        }
        (is_write, block)
    }

    fn protocol_error(&self, err: ProtocolError, output: &mut BytesMut) {
        tracing::debug!("client {}: {err}", self.client.handle.addr);
        Reply::Error(format!("ERR {err}").into()).encode(output, self.client.resp3);
    }

    /// Writes buffered replies, after the WAL sync that `appendfsync always` requires.
    async fn flush(&mut self, output: &mut BytesMut, wrote: bool) -> std::io::Result<()> {
        if output.is_empty() {
            return Ok(());
        }
        if wrote && self.services.durability.policy() == FsyncPolicy::Always {
            // A reply must not acknowledge a write that may not be on disk: close instead.
            self.services
                .durability
                .wait_synced()
                .await
                .map_err(std::io::Error::other)?;
        }
        self.stream.write_all(output).await?;
        self.services
            .stats
            .net_output_bytes
            .fetch_add(output.len() as u64, Ordering::Relaxed);
        output.clear();
        Ok(())
    }
}
