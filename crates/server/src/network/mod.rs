//! The network edge: listeners, the connections that read requests and write replies, and the
//! cron thread. It runs commands through [`crate::commands`] with the [`Services`] they use.

mod connection;
mod cron;
pub mod metrics;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use shale_storage::{Engine, RocksEngine};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use crate::config::Config;
use crate::datadir::DataDir;
use crate::keyspace::{Keyspace, STRIPES};
use crate::services::cluster::{migration, Cluster, WantedRole};
use crate::services::replication::{link, Replication};
use crate::services::{Durability, Services};
use connection::WriteCombiner;

/// Opens the data directory, binds the listeners and serves until shutdown.
pub async fn run(config: Config, config_file: Option<PathBuf>) -> Result<(), String> {
    let opened = Instant::now();
    let rocks_config = &config.rocks;
    tracing::info!(
        "memory budget {} MiB ({}): block cache {} MiB, memtables {} MiB, metadata cache {} MiB, data cache {} MiB",
        config.budget.bytes >> 20,
        config.budget.source.name(),
        rocks_config.block_cache_size >> 20,
        rocks_config.memtable_budget >> 20,
        rocks_config.meta_cache_size >> 20,
        rocks_config.data_cache_size >> 20,
    );
    std::fs::create_dir_all(&config.dir)
        .map_err(|e| format!("can't create data directory {}: {e}", config.dir.display()))?;
    let data_dir = DataDir::new(&config.dir);
    data_dir.remove_leftovers();
    let rocks = Arc::new(
        RocksEngine::open(&data_dir.current(), &config.rocks)
            .map_err(|e| format!("can't open database in {}: {e}", config.dir.display()))?,
    );
    if let Some(torn) = rocks.torn_wal_tail() {
        tracing::warn!(
            "the WAL ended in a damaged record (at byte {} of {}), as a machine that stopped mid-write leaves it: replayed up to it, {} bytes dropped",
            torn.offset,
            torn.file.display(),
            torn.bytes_after
        );
    }
    let engine: Arc<dyn Engine> = rocks.clone();
    let keyspace = Arc::new(
        Keyspace::open(engine.clone(), config.databases)
            .map_err(|e| format!("can't open keyspace: {e}"))?,
    );
    let cluster = match config.cluster_enabled {
        true => Some(Arc::new(Cluster::open(&config.dir)?)),
        false => None,
    };
    let master = config.replication.replicaof.clone();
    let cluster_replica = cluster
        .as_ref()
        .is_some_and(|c| matches!(c.wanted_role(), WantedRole::ReplicaOf(..)));
    let replication = Arc::new(Replication::open(
        rocks,
        keyspace.clone(),
        data_dir,
        master.is_some() || cluster_replica,
    )?);
    if let Some((host, port)) = master {
        replication.follow(host, port);
    }
    if let Some(cluster) = &cluster {
        let promoted = cluster
            .apply_role(&replication)
            .map_err(|e| format!("can't take the role the cluster topology gives: {e}"))?;
        if promoted {
            migration::take_over(cluster, &keyspace)
                .map_err(|e| format!("can't take over the master's migration: {e}"))?;
        }
    }
    tracing::info!("database opened in {} ms", opened.elapsed().as_millis());
    // Before the first client can connect: until a handler is installed, SIGTERM ends the
    // process at once, and the writes still in the WAL buffer are lost.
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("can't handle SIGTERM: {e}"))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("can't handle SIGINT: {e}"))?;

    let mut listeners = Vec::new();
    for host in &config.bind {
        let listener = TcpListener::bind((host.as_str(), config.port))
            .await
            .map_err(|e| format!("can't bind {host}:{}: {e}", config.port))?;
        listeners.push(listener);
    }
    let tcp_port = listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(config.port, |a| a.port());

    let mut config = config;
    config.port = tcp_port;
    let durability = Durability::start(engine.clone(), config.appendfsync)?;
    let commands = crate::commands::acl_catalog();
    let services = Services::new(
        keyspace,
        replication,
        cluster,
        config,
        config_file,
        durability,
        commands,
    );
    services.load_users()?;
    let services = Arc::new(services);
    if let Some(cluster) = &services.cluster {
        for range in cluster.recover() {
            let keyspace = services.keyspace.clone();
            migration::delete_in_background(cluster.clone(), keyspace, range, "moved slots");
        }
    }
    let cron = cron::start(services.clone());
    tokio::spawn(link::supervise(
        services.clone(),
        crate::commands::run_for_master,
    ));
    let combiner = Arc::new(WriteCombiner::new(STRIPES));

    // Before "Ready": whoever waits for that line may scrape at once.
    if services.config.read().metrics_port > 0 {
        let (host, port) = {
            let config = services.config.read();
            let host = config
                .bind
                .first()
                .cloned()
                .unwrap_or_else(|| "127.0.0.1".into());
            (host, config.metrics_port)
        };
        let listener = TcpListener::bind((host.as_str(), port))
            .await
            .map_err(|e| format!("can't bind the metrics port {host}:{port}: {e}"))?;
        tracing::info!("Prometheus metrics at http://{host}:{port}/metrics");
        tokio::spawn(metrics::serve(listener, services.clone()));
    }

    for listener in listeners {
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!("Ready to accept connections tcp {addr}");
        println!("Ready to accept connections tcp {addr}");
        tokio::spawn(accept_loop(listener, services.clone(), combiner.clone()));
    }

    let mut shutdown = services.shutdown.subscribe();
    tokio::select! {
        _ = shutdown.wait_for(|&stop| stop) => {}
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    tracing::info!("shutting down");
    services.shutdown.trigger();
    // Transactions and scripts still running are not acknowledged and never will be: they stop
    // here, and whatever they staged is dropped rather than committed after the last sync.
    services.keyspace.close();
    services.scripts.stop_all();
    services.clients.kill_all();
    for _ in 0..200 {
        if services.clients.count() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    cron.stop(std::time::Duration::from_secs(1));
    services.durability.stop();
    if let Err(err) = services.keyspace.engine().flush_memtables() {
        tracing::warn!("flushing memtables at shutdown failed: {err}");
    }
    tracing::info!("bye");
    Ok(())
}

async fn accept_loop(listener: TcpListener, services: Arc<Services>, combiner: Arc<WriteCombiner>) {
    let mut shutdown = services.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|&stop| stop) => return,
        };
        let (stream, addr) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let combiner = combiner.clone();
        tokio::spawn(connection::serve(services.clone(), combiner, stream, addr));
    }
}
