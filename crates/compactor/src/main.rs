//! `shale-compactor`: a compaction worker. Shale nodes send it their RocksDB compactions
//! (`compaction-workers` on the node) over HTTP; it runs each with RocksDB's
//! `DB::OpenAndCompact` on the node's files, through shared storage, and answers with the
//! result the node installs. It keeps no state: any number of nodes may share it, and it may
//! be stopped at any moment (a node compacts a job it loses locally).

mod args;
mod metrics;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use shale_storage::compaction::{run_job, Cancel, JobRequest, PathMap};
use tokio::sync::Semaphore;

use metrics::Metrics;

struct Worker {
    /// One permit per job run at once.
    jobs: Arc<Semaphore>,
    /// One permit per job taken, running or waiting for a job's permit: as many wait as run,
    /// and a job beyond is answered 503, so its node tries another worker.
    taken: Semaphore,
    path_maps: Vec<PathMap>,
    metrics: Metrics,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_ansi(std::io::stdout().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = match args::Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(args::Exit::Help) => {
            println!("{}", args::USAGE);
            return;
        }
        Err(args::Exit::Error(message)) => {
            eprintln!("{message}\n\n{}", args::USAGE);
            std::process::exit(1);
        }
    };
    let worker = Arc::new(Worker {
        jobs: Arc::new(Semaphore::new(args.jobs)),
        taken: Semaphore::new(args.jobs * 2),
        path_maps: args.path_maps,
        metrics: Metrics::default(),
    });
    let app = Router::new()
        .route("/compact", post(compact))
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .with_state(worker);
    let address = (args.bind.as_str(), args.port);
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("can't listen on {}:{}: {err}", args.bind, args.port);
            std::process::exit(1);
        }
    };
    let bound = listener.local_addr().map_or_else(
        |_| format!("{}:{}", args.bind, args.port),
        |a| a.to_string(),
    );
    // The line a supervisor (or a test) waits for: the port is known once it is printed.
    println!(
        "shale-compactor ready on http://{bound}, {} jobs at once",
        args.jobs
    );
    if let Err(err) = axum::serve(listener, app).await {
        eprintln!("serving: {err}");
        std::process::exit(1);
    }
}

/// `POST /compact`: runs a job, answering once it is done. A node that stops waiting (its
/// timeout, its shutdown) drops the connection, which cancels the job.
async fn compact(State(worker): State<Arc<Worker>>, Json(request): Json<JobRequest>) -> Response {
    let Ok(_taken) = worker.taken.try_acquire() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "busy\n").into_response();
    };
    // Held by the job itself, which runs on after a cancel until RocksDB sees it.
    let Ok(permit) = worker.jobs.clone().acquire_owned().await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    };
    let cancel = Arc::new(Cancel::new());
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    let running = worker.metrics.start();
    let started = Instant::now();
    let job = {
        let worker = worker.clone();
        tokio::task::spawn_blocking(move || {
            let done = run_job(&request, &worker.path_maps, &cancel);
            drop(permit);
            done
        })
    };
    let outcome = job.await;
    drop(running);
    match outcome {
        Ok(Ok(done)) => {
            worker
                .metrics
                .done(started.elapsed(), done.bytes_read, done.bytes_written);
            Json(done.reply).into_response()
        }
        Ok(Err(err)) => {
            worker.metrics.failed();
            tracing::warn!("job failed: {err}");
            let status = if err.is_bad_job() {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            (status, format!("{err}\n")).into_response()
        }
        Err(err) => {
            worker.metrics.failed();
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{err}\n")).into_response()
        }
    }
}

async fn metrics(State(worker): State<Arc<Worker>>) -> impl IntoResponse {
    (
        [("content-type", "text/plain; version=0.0.4")],
        worker.metrics.render(),
    )
}

/// Cancels the job when the request is dropped before it finished.
struct CancelOnDrop(Arc<Cancel>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}
