//! Moving slots to another master (CLUSTERX MIGRATE), on a thread of its own, as Kvrocks's
//! source does it, in Redis's commands:
//!
//! 1. `CLUSTER IMPORT <range> 0` on a connection to the destination, which from then on
//!    takes the slots' keys from that connection only;
//! 2. every key of the slots, as `RESTORE key <expiry> <DUMP payload> REPLACE ABSTTL`
//!    (`DEL` for one gone meanwhile), pipelined, while clients go on reading and writing
//!    them here; every key written meanwhile is recorded (`keyspace::SlotMoves`);
//! 3. the recorded keys again, in rounds, until few are left;
//! 4. writes to the slots refused (`-TRYAGAIN`); once the writes already past that check are
//!    done (every key lock taken once), the last recorded keys;
//! 5. `CLUSTER IMPORT <range> 1`: the destination serves the slots; here they are
//!    redirected to it (`-MOVED`), and their keys deleted.
//!
//! Any failure (the link, a reply, FLUSHALL meanwhile) sends `CLUSTER IMPORT <range> 2`, on
//! which the destination drops what it took, and writes resume here: both sides are as
//! before, and CLUSTER INFO says `fail`.
//!
//! The migration's start and end are also written with the data (`Keyspace::record_migration`),
//! so that a replica promoted after its master died knows what became of it ([`take_over`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shale_protocol::encode_request;

use super::{Cluster, Node, SlotRange};
use crate::error::Error;
use crate::keyspace::{Db, Keyspace};

/// Keys sent per pipelined round trip.
const PIPELINE: usize = 128;
/// Catch-up rounds end once this few recorded keys are left, or after `ROUNDS`.
const FEW_LEFT: usize = 64;
const ROUNDS: usize = 10;
/// How long the destination may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A migration to run: the slots, where to, and the password this node's clients use, which
/// the destination, a node of the same cluster, shares.
pub struct Job {
    pub range: SlotRange,
    pub destination: Node,
    pub password: Option<String>,
}

/// Runs `job` on a thread of its own; its end is recorded in `cluster`.
pub fn spawn(cluster: Arc<Cluster>, keyspace: Arc<Keyspace>, job: Job) {
    let spawned = std::thread::Builder::new()
        .name("slot-migration".into())
        .spawn({
            let cluster = cluster.clone();
            move || run(&cluster, &keyspace, &job)
        });
    if let Err(err) = spawned {
        tracing::warn!("can't start the slot migration: {err}");
        if let Err(err) = cluster.end_migration(false) {
            tracing::warn!("{}", super::err_text(&err));
        }
    }
}

fn run(cluster: &Cluster, keyspace: &Keyspace, job: &Job) {
    let range = job.range;
    let target = job.destination.addr();
    tracing::info!("migrating slots {range} to {target}");
    let mut link = None;
    let outcome = migrate(keyspace, job, &mut link);
    let success = outcome.is_ok();
    if let Err(reason) = &outcome {
        tracing::warn!("the migration of slots {range} to {target} failed: {reason}");
        // Had the destination taken IMPORT 1 and only its reply been lost, it would refuse
        // this and serve the slots as this node does again: a gap Kvrocks has too
        // (apache/kvrocks#3147).
        if let Some(link) = link.as_mut() {
            let _ = link.call(&[b"CLUSTER", b"IMPORT", range.to_string().as_bytes(), b"2"]);
        }
    }
    if let Err(err) = cluster.end_migration(success) {
        tracing::warn!("{}", super::err_text(&err));
    }
    // Before the first deletion, which the replicas get after it.
    record_or_warn(cluster, keyspace);
    if !success {
        keyspace.slot_moves.stop();
        return;
    }
    // Clients' writes to the slots stay refused here: one that passed its check before the
    // slots were redirected must not land where no one reads it.
    keyspace.slot_moves.finish();
    tracing::info!("slots {range} migrated to {target}; deleting their keys here");
    report_deletion(
        delete_leftover(cluster, keyspace, range),
        range,
        "migrated slots",
    );
}

/// Writes the last migration's line with the data, for the replicas, if it changed: when it
/// starts and ends, and when an import or a topology takes its slots over. The line is read
/// and written under one lock, so a writer that read an older line cannot write it last.
pub fn record(cluster: &Cluster, keyspace: &Keyspace) -> Result<(), Error> {
    let _recording = cluster.recording();
    let Some(line) = cluster.migration_line() else {
        return Ok(());
    };
    if keyspace.is_replica() || keyspace.recorded_migration()?.as_ref() == Some(&line) {
        return Ok(());
    }
    keyspace.record_migration(&line)
}

/// [`record`], for callers that go on when it fails: the replicas then keep the older line.
pub fn record_or_warn(cluster: &Cluster, keyspace: &Keyspace) {
    if let Err(err) = record(cluster, keyspace) {
        tracing::warn!(
            "can't record the migration for the replicas: {}",
            super::err_text(&err)
        );
    }
}

/// After this node was promoted to master: it takes over the last migration its master
/// recorded, and deletes the keys of slots that migration moved away.
pub fn take_over(cluster: &Arc<Cluster>, keyspace: &Arc<Keyspace>) -> Result<(), Error> {
    let Some(line) = keyspace.recorded_migration()? else {
        return Ok(());
    };
    if let Some(range) = cluster.adopt_migration(&line)? {
        delete_in_background(cluster.clone(), keyspace.clone(), range, "moved slots");
    }
    Ok(())
}

/// Deletes the keys of `range` here, batch by batch, while they are a leftover (an import of
/// the slots stops it, and deletes what is here itself). Returns whether it got to the end.
pub fn delete_leftover(
    cluster: &Cluster,
    keyspace: &Keyspace,
    range: SlotRange,
) -> Result<bool, Error> {
    // Each batch runs under the lock an import's start takes, and only while still a leftover.
    let finished = delete_batches(keyspace, range, || {
        let cleaning = cluster.cleaning();
        cluster.is_leftover(range).then_some(cleaning)
    })?;
    match finished {
        // Recorded under the same lock, before an import can begin.
        Some(_cleaning) => cluster.cleaned(range).map(|()| true),
        None => Ok(false),
    }
}

/// Deletes every key of `range` here (an import's start, for what an earlier one left).
pub fn delete_all(keyspace: &Keyspace, range: SlotRange) -> Result<(), Error> {
    delete_batches(keyspace, range, || Some(())).map(|_| ())
}

/// Deletes the keys of `range` a batch at a time, each batch while what `before_batch`
/// returns is held. Returns that, still held, once no key is left, or `None` if `before_batch`
/// stopped it first. A pass through the slots ends with one more from their start, which
/// must find nothing, or make progress.
fn delete_batches<G>(
    keyspace: &Keyspace,
    range: SlotRange,
    mut before_batch: impl FnMut() -> Option<G>,
) -> Result<Option<G>, Error> {
    let db = keyspace.db(0);
    let mut after: Option<Bytes> = None;
    let mut first_of_last_pass: Option<Bytes> = None;
    loop {
        let Some(held) = before_batch() else {
            return Ok(None);
        };
        let from_start = after.is_none();
        let Some((head, tail)) = db.delete_slot_batch(range.first, range.last, after.as_deref())?
        else {
            if from_start {
                return Ok(Some(held));
            }
            after = None;
            continue;
        };
        if from_start {
            if first_of_last_pass.as_ref() == Some(&head) {
                return Err(Error::msg("a key of the slots could not be deleted"));
            }
            first_of_last_pass = Some(head);
        }
        after = Some(tail);
    }
}

fn report_deletion(outcome: Result<bool, Error>, range: SlotRange, what: &str) {
    match outcome {
        Ok(true) => tracing::info!("the keys of {what} {range} are deleted here"),
        Ok(false) => tracing::info!("the keys of {what} {range} are being imported again"),
        Err(err) => tracing::warn!(
            "deleting the keys of {what} {range} stopped: {}",
            super::err_text(&err)
        ),
    }
}

/// Deletes the keys of `range` here on a thread of its own, while they are a leftover:
/// slots that moved away, or that an import left half done.
pub fn delete_in_background(
    cluster: Arc<Cluster>,
    keyspace: Arc<Keyspace>,
    range: SlotRange,
    what: &'static str,
) {
    let spawned = std::thread::Builder::new()
        .name("slot-cleanup".into())
        .spawn(move || report_deletion(delete_leftover(&cluster, &keyspace, range), range, what));
    if let Err(err) = spawned {
        tracing::warn!("can't delete the keys of {what} {range}: {err}");
    }
}

fn migrate(keyspace: &Keyspace, job: &Job, link: &mut Option<Link>) -> Result<(), String> {
    let range = job.range;
    let range_text = range.to_string();
    let link = link.insert(Link::connect(&job.destination, job.password.as_deref())?);
    link.call(&[b"CLUSTER", b"IMPORT", range_text.as_bytes(), b"0"])?;
    let moves = &keyspace.slot_moves;
    moves.track(keyspace.stored_db(0), range.first, range.last);
    let db = keyspace.db(0);
    let failed = |err: Error| super::err_text(&err);
    let started = Instant::now();

    let mut after: Option<Bytes> = None;
    let mut sent = 0usize;
    loop {
        let keys = db
            .keys_in_slots(range.first, range.last, after.as_deref(), PIPELINE, false)
            .map_err(failed)?;
        let Some(last) = keys.last().cloned() else {
            break;
        };
        sent += keys.len();
        send(&db, link, &keys)?;
        after = Some(last);
        flushed(keyspace)?;
    }
    for _ in 0..ROUNDS {
        if moves.written_count() <= FEW_LEFT {
            break;
        }
        let keys: Vec<Bytes> = moves.take_written().into_iter().map(Bytes::from).collect();
        sent += keys.len();
        send(&db, link, &keys)?;
        flushed(keyspace)?;
    }
    moves.forbid();
    let forbidden = Instant::now();
    // Writes that passed the check before hold their keys' locks until they are written.
    drop(db.lock_all().map_err(failed)?);
    let keys: Vec<Bytes> = moves.take_written().into_iter().map(Bytes::from).collect();
    sent += keys.len();
    send(&db, link, &keys)?;
    flushed(keyspace)?;
    // A topology that made this node a replica meanwhile (a failover, perhaps of a master
    // that was only slow) gave the slots to the promoted node, which reports this migration
    // failed: the destination must not take them.
    if keyspace.is_replica() {
        return Err("this node is no longer a master".into());
    }
    link.call(&[b"CLUSTER", b"IMPORT", range_text.as_bytes(), b"1"])?;
    tracing::info!(
        "slots {range}: {sent} keys sent in {} ms, writes to them refused for the last {} ms",
        started.elapsed().as_millis(),
        forbidden.elapsed().as_millis()
    );
    Ok(())
}

/// FLUSHDB or FLUSHALL during a migration fails it, as in Kvrocks.
fn flushed(keyspace: &Keyspace) -> Result<(), String> {
    match keyspace.slot_moves.was_flushed() {
        true => Err("the database was flushed during the migration".into()),
        false => Ok(()),
    }
}

/// Sends `keys` as they are now: RESTORE with the key's DUMP payload and absolute expiry,
/// or DEL for a key that no longer exists; every reply must be a success. A round trip's
/// replies are read after the next one is sent, so that this node reads and encodes keys
/// while the destination writes the ones before.
fn send(db: &Db<'_>, link: &mut Link, keys: &[Bytes]) -> Result<(), String> {
    let mut in_flight = 0;
    for chunk in keys.chunks(PIPELINE) {
        let mut request = Vec::new();
        for key in chunk {
            match db.dump_value(key).map_err(|e| super::err_text(&e))? {
                Some((value, expire_at)) => {
                    let payload = shale_rdb::dump::encode(&value);
                    let expire_at = expire_at.to_string();
                    let args: [&[u8]; 6] = [
                        b"RESTORE",
                        key,
                        expire_at.as_bytes(),
                        &payload,
                        b"REPLACE",
                        b"ABSTTL",
                    ];
                    encode_request(&mut request, &args);
                }
                None => {
                    let args: [&[u8]; 2] = [b"DEL", key];
                    encode_request(&mut request, &args);
                }
            }
        }
        link.write(&request)?;
        link.read_replies(in_flight)?;
        in_flight = chunk.len();
    }
    link.read_replies(in_flight)
}

/// The connection to the destination.
struct Link {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Link {
    fn connect(node: &Node, password: Option<&str>) -> Result<Link, String> {
        let addr = (node.host.as_str(), node.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut all| all.next())
            .ok_or_else(|| format!("can't resolve {}", node.addr()))?;
        let stream = TcpStream::connect_timeout(&addr, REPLY_TIMEOUT)
            .map_err(|e| format!("can't connect to {}: {e}", node.addr()))?;
        let configured = stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(REPLY_TIMEOUT)))
            .and_then(|()| stream.set_nodelay(true));
        configured.map_err(|e| e.to_string())?;
        let reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let mut link = Link {
            writer: stream,
            reader,
        };
        if let Some(password) = password {
            link.call(&[b"AUTH", password.as_bytes()])?;
        }
        Ok(link)
    }

    fn call(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut request = Vec::new();
        encode_request(&mut request, args);
        self.exchange(&request, 1)
    }

    fn exchange(&mut self, request: &[u8], replies: usize) -> Result<(), String> {
        self.write(request)?;
        self.read_replies(replies)
    }

    fn write(&mut self, request: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(request)
            .map_err(|e| format!("writing to the destination: {e}"))
    }

    /// Reads `replies` replies, each of which must be a status or an integer (what RESTORE,
    /// DEL, AUTH and CLUSTER IMPORT answer).
    fn read_replies(&mut self, replies: usize) -> Result<(), String> {
        let mut line = Vec::new();
        for _ in 0..replies {
            line.clear();
            let read = (&mut self.reader)
                .take(64 * 1024)
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("reading from the destination: {e}"))?;
            if read == 0 || !line.ends_with(b"\n") {
                return Err("the destination closed the connection".into());
            }
            match line.first() {
                Some(b'+') | Some(b':') => {}
                _ => {
                    let text = String::from_utf8_lossy(&line);
                    return Err(format!("the destination replied {}", text.trim_end()));
                }
            }
        }
        Ok(())
    }
}
