//! Lua scripting: EVAL and EVALSHA run Lua 5.1 scripts with Redis's Lua API.
//!
//! A script runs as a transaction ([`crate::keyspace::Transaction`]): the keys it declares are
//! locked before it starts, any other key the moment it touches one, and all its writes commit
//! as one batch when it ends. Clients of other keys never wait for it, and nobody gets Redis's
//! `-BUSY`. Because nothing is written before the end, SCRIPT KILL can stop a script even once
//! it has written: its writes are simply dropped. Only inside EXEC, whose batch its writes
//! join, does it refuse as Redis does.
//!
//! Lua states are pooled (one is needed per script running at the same time); each compiles a
//! script once and keeps the function, as Redis keeps `f_<sha>`.

mod convert;
pub mod flags;
pub mod functions;
mod libraries;
mod redis_api;
mod sandbox;
mod vm;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::error::Error;

pub use vm::{Invocation, Registered, ScriptHost, Target, Vm};

/// The script cache and the Lua states that run scripts.
#[derive(Default)]
pub struct Scripts {
    sources: RwLock<HashMap<String, Bytes>>,
    /// Bumped by SCRIPT FLUSH: pooled states of an older generation are dropped.
    generation: AtomicU64,
    pool: Mutex<Vec<Vm>>,
    running: Mutex<Vec<Arc<RunningScript>>>,
    /// Scripts whose last run took less than [`FAST_SCRIPT`].
    fast: RwLock<HashSet<String>>,
    /// The stored function libraries as last read (see `functions`).
    libraries: RwLock<Option<Arc<functions::Libraries>>>,
    /// Held by a change to the libraries, which checks them against the current ones.
    changing: Mutex<()>,
}

/// A script whose last run was shorter than this runs on its connection's worker thread.
const FAST_SCRIPT: Duration = Duration::from_millis(10);

/// A script in execution, as SCRIPT KILL, SHUTDOWN and the cron see it.
pub struct RunningScript {
    started: Instant,
    killed: AtomicBool,
    /// Whether it has run a write command.
    wrote: AtomicBool,
    /// Whether it runs inside EXEC, whose writes its own join.
    in_exec: bool,
    /// The socket of the client waiting for its reply.
    client_fd: i32,
    /// The FCALL that runs, if this is a function: SCRIPT KILL stops only scripts, FUNCTION
    /// KILL only functions, and FUNCTION STATS shows it.
    function: Option<FunctionCall>,
}

/// Redis's refusal to stop a script that wrote, which is Shale's inside EXEC, where the
/// script's writes join the EXEC's and cannot be dropped alone.
const WROTE: &str = "Sorry the script already executed write commands against the dataset. You \
                     can either wait the script termination or kill the server in a hard way \
                     using the SHUTDOWN NOSAVE command.";

pub struct FunctionCall {
    pub name: String,
    pub command: Vec<Bytes>,
}

/// A running function, as FUNCTION STATS shows it.
pub struct RunningFunction {
    pub name: String,
    pub command: Vec<Bytes>,
    pub duration: Duration,
}

impl RunningScript {
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Notes that the script runs a write command.
    pub fn writes(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }

    /// Why SCRIPT KILL, FUNCTION KILL and the cron may not stop it, if they may not. Any other
    /// script is stopped with its writes, which were not committed yet.
    fn unkillable(&self) -> Option<&'static str> {
        (self.in_exec && self.wrote.load(Ordering::Relaxed)).then_some(WROTE)
    }
}

/// A script listed as running (see [`Scripts::started`]).
pub struct Running<'a> {
    scripts: &'a Scripts,
    pub script: Arc<RunningScript>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let script = &self.script;
        self.scripts
            .running
            .lock()
            .retain(|s| !Arc::ptr_eq(s, script));
    }
}

pub fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

impl Scripts {
    /// Caches a script and returns its SHA1.
    pub fn load(&self, source: Bytes) -> String {
        let sha = sha1_hex(&source);
        self.sources.write().entry(sha.clone()).or_insert(source);
        sha
    }

    /// A cached script, by SHA1 (any case): its SHA1 as `load` returned it, and its source.
    pub fn lookup(&self, sha: &[u8]) -> Option<(String, Bytes)> {
        let sha = std::str::from_utf8(sha).ok()?.to_ascii_lowercase();
        let source = self.sources.read().get(&sha).cloned()?;
        Some((sha, source))
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.lookup(sha).is_some()
    }

    /// Whether the script's last run was short; a script never run counts as long.
    pub fn is_fast(&self, sha: &str) -> bool {
        self.fast.read().contains(sha)
    }

    pub fn record_duration(&self, sha: &str, took: Duration) {
        let fast = took < FAST_SCRIPT;
        if fast != self.is_fast(sha) {
            let mut set = self.fast.write();
            if fast {
                set.insert(sha.to_string());
            } else {
                set.remove(sha);
            }
        }
    }

    pub fn count(&self) -> usize {
        self.sources.read().len()
    }

    /// SCRIPT FLUSH: forgets every script, and the functions compiled from them.
    pub fn flush(&self) {
        self.sources.write().clear();
        self.fast.write().clear();
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.pool.lock().clear();
    }

    /// Takes a Lua state from the pool, or makes one.
    pub fn checkout(&self) -> Result<Vm, mlua::Error> {
        let generation = self.generation.load(Ordering::Relaxed);
        match self.pool.lock().pop() {
            Some(vm) if vm.generation == generation => Ok(vm),
            _ => Vm::new(generation),
        }
    }

    pub fn checkin(&self, vm: Vm) {
        if vm.generation == self.generation.load(Ordering::Relaxed) {
            self.pool.lock().push(vm);
        }
    }

    /// A script or function that starts running now for the client on socket `client_fd`,
    /// inside EXEC or not. It is listed as running until the returned guard drops, however its
    /// run ends.
    pub fn started(
        &self,
        client_fd: i32,
        in_exec: bool,
        function: Option<FunctionCall>,
    ) -> Running<'_> {
        let script = Arc::new(RunningScript {
            started: Instant::now(),
            killed: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            in_exec,
            client_fd,
            function,
        });
        self.running.lock().push(script.clone());
        Running {
            scripts: self,
            script,
        }
    }

    /// SCRIPT KILL (`functions` false) or FUNCTION KILL: stops every script or function that
    /// has run longer than `limit` and may be stopped. With none of its kind but one that may
    /// not be, the error says why, as Redis's `-UNKILLABLE`; with none but some of the other
    /// kind, it names the other kill, as Redis's `-BUSY` does.
    pub fn kill(&self, limit: Duration, functions: bool) -> Result<(), Error> {
        let running = self.running.lock();
        let (mut killed, mut others, mut refusal) = (0, 0, None);
        for script in running.iter() {
            if script.started.elapsed() < limit || script.is_killed() {
                continue;
            }
            if let Some(reason) = script.unkillable() {
                refusal = Some(reason);
            } else if script.function.is_some() == functions {
                script.killed.store(true, Ordering::Relaxed);
                killed += 1;
            } else {
                others += 1;
            }
        }
        match (killed, refusal, others, functions) {
            (0, Some(reason), _, _) => Err(Error::Unkillable(reason)),
            (0, None, 0, _) => Err(Error::NotBusy),
            (0, None, _, true) => Err(Error::Busy("SCRIPT KILL")),
            (0, None, _, false) => Err(Error::Busy("FUNCTION KILL")),
            _ => Ok(()),
        }
    }

    /// The function that has run longest of those running now.
    pub fn running_function(&self) -> Option<RunningFunction> {
        let running = self.running.lock();
        let script = running
            .iter()
            .filter(|script| script.function.is_some())
            .min_by_key(|script| script.started)?;
        let call = script.function.as_ref()?;
        Some(RunningFunction {
            name: call.name.clone(),
            command: call.command.clone(),
            duration: script.started.elapsed(),
        })
    }

    /// Stops every running script, inside EXEC too (SHUTDOWN): none of their writes commit.
    pub fn stop_all(&self) {
        for script in self.running.lock().iter() {
            script.killed.store(true, Ordering::Relaxed);
        }
    }

    /// Stops the scripts that have run longer than `limit` for a client that has gone: their
    /// reply can no longer be delivered and their writes are not committed yet, so they are
    /// dropped as SCRIPT KILL drops them (those it may stop), rather than hold their keys and a
    /// core forever. Returns how many it stopped.
    pub fn stop_orphans(&self, limit: Duration) -> usize {
        let running = self.running.lock();
        let mut stopped = 0;
        for script in running.iter() {
            if script.started.elapsed() >= limit
                && !script.is_killed()
                && script.unkillable().is_none()
                && peer_closed(script.client_fd)
            {
                script.killed.store(true, Ordering::Relaxed);
                stopped += 1;
            }
        }
        stopped
    }
}

/// Whether the peer of socket `fd` has closed its end. The socket stays open while its
/// connection runs the script, so `fd` is still that client's.
fn peer_closed(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: `poll` points to one valid pollfd, and a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}
