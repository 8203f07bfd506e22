//! `fieldstore server`: serves the store of its config over TCP until SIGTERM or SIGINT.

use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;
use fieldstore::open::TOKEN_ENV;
use fieldstore::remote::auth::TokensFile;
use fieldstore::remote::metrics::serve_metrics;
use fieldstore::remote::protocol::{DEFAULT_CHUNK_SIZE, DEFAULT_MAX_PAYLOAD};
use fieldstore::remote::server::{
    default_connection_budget, default_memory_budget, parse_size, spawn_lifecycle_schedule,
    DEFAULT_BUDGET_WAIT, DEFAULT_MAX_REQUESTS_PER_IDENTITY, DEFAULT_STALL_TIMEOUT,
};
use fieldstore::remote::{ClientCertificates, Server, ServerOptions, TlsAcceptor};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::context::Session;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Address to serve the binary protocol on; port 0 picks a free one. The bound address is
    /// printed on stdout. Default: 127.0.0.1:7654, unless --http alone is given.
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Also (or, without --listen, only) serve HTTP here: the JSON API under /api/v1/ and the
    /// web view at / (docs/http.md), with the same tokens, TLS, budget and limits. The bound
    /// address is printed on stdout as `http on http://HOST:PORT/`.
    #[arg(long, value_name = "HOST:PORT")]
    http: Option<String>,
    /// Also (or, without --listen and --http, only) serve the binary protocol on a Unix socket
    /// at PATH, for programs on this host (`socket: PATH` in their remote config): fields of
    /// 256 KiB and more are then handed over as sealed shared-memory files, never copied
    /// through a socket (docs/protocol.md, "Hand-over"). Who may connect is the socket file's
    /// permissions, and the token as over TCP. Printed on stdout as `socket at PATH`.
    #[arg(long, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
    /// Secret clients must present (default: $FIELDSTORE_TOKEN; none: anyone who can connect).
    #[arg(long, conflicts_with = "tokens")]
    token: Option<String>,
    /// Identities with their tokens and grants (YAML, docs/authorization.md); re-read on SIGHUP.
    #[arg(long, value_name = "FILE")]
    tokens: Option<std::path::PathBuf>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<String>,
    /// Bytes per chunk of streamed retrieve and list replies.
    #[arg(long, default_value_t = DEFAULT_CHUNK_SIZE)]
    chunk_size: usize,
    /// The largest frame payload accepted (the largest field a client may archive), in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_PAYLOAD)]
    max_frame: u64,
    /// Connections beyond this are refused as busy.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// On SIGTERM/SIGINT, how long to wait for requests in flight (flushes) to finish.
    #[arg(long, default_value_t = 60)]
    grace_seconds: u64,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key. Clients then need `tls:`.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Ask clients for a TLS certificate signed by this CA (PEM) and refuse those without one;
    /// with --tokens, an identity's `certificate:` names the certificates that are it.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_client_ca: Option<std::path::PathBuf>,
    /// With --tls-client-ca: a client without a certificate may still connect (and then proves
    /// itself with a token).
    #[arg(long, requires = "tls_client_ca")]
    tls_client_optional: bool,
    /// Memory all clients together may make the server hold (fields being received, retrieve
    /// and list buffers), e.g. 512MiB; beyond it clients wait, held back by TCP. Default: a
    /// quarter of the machine's memory, between 256 MiB and 8 GiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// The part of --memory-budget one connection may hold, e.g. 64MiB. Default: 64 MiB, or an
    /// eighth of --memory-budget if less.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    connection_budget: Option<u64>,
    /// Seconds a request waits for memory before it is refused as busy.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BUDGET_WAIT.as_secs())]
    budget_wait: u64,
    /// Requests one identity may have in progress at once (an archive batch counts as one from
    /// its first field to its flush); more are refused as busy. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_REQUESTS_PER_IDENTITY)]
    max_requests_per_identity: usize,
    /// Seconds a client may stop sending in the middle of a frame, or read nothing of what it
    /// is sent, before it is dropped (freeing what it holds; subscribers resume).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_STALL_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    stall_timeout: u64,
}

pub fn run(args: ServerArgs, session: &Session) -> Result<()> {
    let loaded = session.config()?;
    let config = loaded.config.clone();
    let tokens = match &args.tokens {
        Some(path) => Some(Arc::new(TokensFile::load(path)?)),
        None => None,
    };
    let token = match tokens {
        Some(_) => None,
        None => args
            .token
            .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty())),
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let clients = args.tls_client_ca.as_ref().map(|ca| ClientCertificates {
                ca: ca.clone(),
                optional: args.tls_client_optional,
            });
            Some(TlsAcceptor::new(cert, key, clients.as_ref())?)
        }
        _ => None,
    };
    if token.is_none() && tokens.is_none() {
        tracing::warn!("no --token or {TOKEN_ENV}: any client that can connect is served");
    }
    let memory_budget = args.memory_budget.unwrap_or_else(default_memory_budget);
    let opts = ServerOptions {
        token,
        tokens: tokens.clone(),
        chunk_size: args.chunk_size.max(1),
        max_payload: args.max_frame,
        max_connections: args.max_connections,
        grace: Duration::from_secs(args.grace_seconds),
        tls,
        memory_budget,
        connection_budget: args
            .connection_budget
            .unwrap_or_else(|| default_connection_budget(memory_budget)),
        budget_wait: Duration::from_secs(args.budget_wait),
        max_requests_per_identity: args.max_requests_per_identity,
        stall_timeout: Duration::from_secs(args.stall_timeout),
    };
    let factory: Box<fieldstore::remote::CreatorFdbFactory> =
        Box::new(move |creator| match creator {
            Some(c) => fieldstore::open(&config.acting_for(c)),
            None => fieldstore::open(&config),
        });
    let scheme = if args.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    let mut out = std::io::stdout().lock();
    let server = match (&args.listen, &args.http, &args.socket) {
        (None, None, Some(path)) => Server::bind_local_only(path, factory, opts)
            .with_context(|| format!("starting the server for {}", loaded.source))?,
        (None, Some(http), _) => {
            let server = Server::bind_http_only(http, factory, opts)
                .with_context(|| format!("starting the server for {}", loaded.source))?;
            writeln!(out, "http on {scheme}://{}/", server.local_addr())?;
            server
        }
        (listen, http, _) => {
            let listen = listen.as_deref().unwrap_or("127.0.0.1:7654");
            let server = Server::bind_recording_creators(listen, factory, opts)
                .with_context(|| format!("starting the server for {}", loaded.source))?;
            if let Some(http) = http {
                let l = TcpListener::bind(http)
                    .with_context(|| format!("cannot listen for HTTP on {http}"))?;
                let addr = server.serve_http(l)?;
                writeln!(out, "http on {scheme}://{addr}/")?;
            }
            server
        }
    };
    if let Some(addr) = &args.metrics {
        let l = TcpListener::bind(addr)
            .with_context(|| format!("cannot listen for metrics on {addr}"))?;
        writeln!(out, "metrics on http://{}/metrics", l.local_addr()?)?;
        let m = server.metrics();
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve_metrics(l, m))?;
    }
    if args.tls_cert.is_some() {
        tracing::info!("serving TLS only");
    }
    if let Some(path) = &args.socket {
        if args.listen.is_some() || args.http.is_some() {
            server.serve_local(path)?;
        }
        writeln!(out, "socket at {}", path.display())?;
    }
    if args.listen.is_some() || (args.http.is_none() && args.socket.is_none()) {
        writeln!(out, "listening on {}", server.local_addr())?;
    }
    out.flush()?;
    drop(out);

    let handle = server.shutdown_handle();
    let mut signals =
        Signals::new([SIGTERM, SIGINT, SIGHUP]).context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut first = true;
            for sig in signals.forever() {
                if sig == SIGHUP {
                    reload(tokens.as_deref());
                } else if first {
                    tracing::info!(
                        signal = sig,
                        "stopping gracefully (signal again to stop now)"
                    );
                    handle.shutdown();
                    first = false;
                } else {
                    std::process::exit(128 + sig);
                }
            }
        })?;
    // The config's pipelines follow the store it serves, on threads of their own; a pipeline
    // that fails is logged and stops alone, the server goes on.
    let pipelines_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pipelines = super::pipeline_store::spawn_config_pipelines(session, &pipelines_stop)?;
    // The config's lifecycle rules, when it gives them a schedule (`lifecycle: {every: 1h}`).
    let schedule = match &loaded.config {
        fieldstore::model::config::FdbConfig::Local(local) => {
            spawn_lifecycle_schedule(local, server.metrics(), pipelines_stop.clone())?
        }
        _ => None,
    };
    let served = server.run();
    pipelines_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for p in pipelines {
        let _ = p.join();
    }
    if let Some(s) = schedule {
        let _ = s.join();
    }
    served?;
    Ok(())
}

/// SIGHUP: the tokens file again. A file that became invalid is reported and the identities stay
/// as they were, so a typo cannot lock every client out.
fn reload(tokens: Option<&TokensFile>) {
    let Some(t) = tokens else {
        tracing::info!("SIGHUP: no --tokens file to re-read");
        return;
    };
    match t.reload() {
        Ok(n) => tracing::info!(identities = n, file = %t.path().display(), "tokens file re-read"),
        Err(e) => tracing::error!("tokens file not re-read, the previous identities stay: {e}"),
    }
}
