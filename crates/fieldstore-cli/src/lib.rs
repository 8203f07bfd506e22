//! `fieldstore`: the command-line tool. Subcommands mirror FDB5's `fdb-*` tools.
//!
//! A library as well as the program, so the Python extension can carry the same command when it
//! is built from source (`fieldstore._cli`): [`run`] is the whole command, given its arguments.
#![deny(clippy::print_stdout)]

#[macro_use]
mod output;

mod commands;
mod context;
mod exit;
mod fdb_info;
mod fdb_names;
mod memory;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use clap::{Parser, Subcommand};

use commands::request::RequestCmd;
use commands::schema::SchemaCmd;
use commands::store::{
    AxesArgs, CheckArgs, ControlArgs, DoitArgs, DumpArgs, ListArgs, ReadArgs, StatsArgs, VisitArgs,
    WriteArgs,
};

#[derive(Parser, Debug)]
#[command(
    name = "fieldstore",
    version,
    about = "A metadata-driven store for meteorological fields (FDB5-compatible)"
)]
struct Cli {
    /// FDB5-style YAML config file (overrides FDB_CONFIG, FDB_CONFIG_FILE and FDB_HOME).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// More log output (repeat for more).
    #[arg(short = 'v', long = "log-verbose", global = true, action = clap::ArgAction::Count, hide = true)]
    log_level: u8,
    /// Print as FDB5 5.10's tools do (set by the `fdb-*` names; docs/fdb-tools.md).
    #[arg(long, global = true, hide = true)]
    fdb5_output: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Which config and schema are in use, found where, and why.
    Info,
    /// Put FDB5's tool names (fdb-list, fdb-write, ...) beside this command as symlinks to it,
    /// so scripts written for FDB5's tools run on fieldstore.
    InstallFdbTools(commands::fdb_tools::InstallFdbToolsArgs),
    /// Schema files: check, split a key, show.
    #[command(subcommand)]
    Schema(SchemaCmd),
    /// Archive GRIB files (or standard input); flushed at the end, all or nothing.
    Write(WriteArgs),
    /// Retrieve the fields a request names into a file (`-`: standard output).
    Read(ReadArgs),
    /// Values at grid points, places or boxes of the fields a request names, reading only the
    /// bytes those points need (GribJump's extraction).
    Extract(commands::extract::ExtractArgs),
    /// Add extraction information to fields stored without it (FDB5's format, older
    /// databases), so extract reads only the bytes a few points need; resumable.
    ExtractIndex(commands::extract_index::ExtractIndexArgs),
    /// Follow fields as flushes make them visible: one line each, or a command run per field.
    Watch(commands::watch::WatchArgs),
    /// List fields, indexes or databases matching a partial request.
    List(ListArgs),
    /// Values present for each keyword.
    Axes(AxesArgs),
    /// Database directories matching a request.
    Where(VisitArgs),
    /// Delete whole databases (dry run unless --doit).
    Wipe(DoitArgs),
    /// Delete masked (replaced) fields (dry run unless --doit).
    Purge(DoitArgs),
    /// Move whole databases to another configured root (tier), atomically for readers.
    Move(commands::relocate::MoveArgs),
    /// Lifecycle rules of the config (move and wipe databases as they age): `run [--dry-run]`.
    #[command(subcommand)]
    Lifecycle(commands::lifecycle::LifecycleCommand),
    /// Convert whole databases between fieldstore's format and FDB5's, in place, atomically for
    /// readers (--to fdb5 | fieldstore).
    Convert(commands::convert::ConvertArgs),
    /// Index GRIB files where they lie, under their MARS keys, copying no bytes; a later read
    /// of a file changed or gone fails naming it.
    Adopt(commands::adopt::AdoptArgs),
    /// Statistics of databases.
    Stats(StatsArgs),
    /// The journal of databases, record by record.
    Dump(DumpArgs),
    /// Merge the indexes of databases into one per index key (flushes also merge, size-tiered:
    /// four indexes of one size class become one).
    Compact { request: String },
    /// Lock, unlock or show the status of actions on databases.
    Control(ControlArgs),
    /// Files of databases that no journal record names: index files showing that a journal
    /// lost flushes it once held (a toc cut short or replaced), and what flushes in progress or
    /// cut short leave. Fails if a journal lost flushes or a database cannot be read.
    Check(CheckArgs),
    /// Make realistic sample GRIB fields with ecCodes.
    Sample(commands::sample::SampleArgs),
    /// Load-test a store: a forecast's output written, read or listed by many processes, or the
    /// DAOS field-I/O patterns; reports fields/s, MiB/s and latency percentiles.
    Hammer(commands::hammer::HammerArgs),
    /// Serve the config's store over TCP to `type: remote` clients.
    Server(commands::server::ServerArgs),
    /// MARS requests: parse and expand.
    #[command(subcommand)]
    Request(RequestCmd),
    /// MultIO plan files (select, statistics, encode, sink) run over GRIB files.
    #[command(subcommand)]
    Pipeline(commands::pipeline::PipelineCmd),
}

/// How this command was started: its arguments and what runs it again (hammer's workers,
/// install-fdb-tools' links).
struct Invocation {
    argv: Vec<OsString>,
    /// The program and the arguments before a command's own; empty: this process's executable.
    program: Vec<OsString>,
}

static INVOCATION: OnceLock<Invocation> = OnceLock::new();

/// The command's arguments after the program's name, as it was started.
pub(crate) fn arguments() -> Vec<OsString> {
    match INVOCATION.get() {
        Some(i) => i.argv.iter().skip(1).cloned().collect(),
        None => std::env::args_os().skip(1).collect(),
    }
}

/// What runs this command again: the program, then arguments to put before the command's own
/// (`python -m fieldstore`).
pub(crate) fn program() -> anyhow::Result<(PathBuf, Vec<OsString>)> {
    use anyhow::Context;
    match INVOCATION.get().map(|i| i.program.as_slice()) {
        Some([first, rest @ ..]) => Ok((PathBuf::from(first), rest.to_vec())),
        _ => Ok((
            std::env::current_exe().context("cannot tell where this fieldstore command is")?,
            Vec::new(),
        )),
    }
}

/// The whole command: `argv` as a program's (its name first: an FDB5 tool name makes it that
/// tool), `program` what runs it again (empty: this process's executable). Returns the exit
/// status. Runs once per process (the first call's arguments are the ones kept).
pub fn run(argv: Vec<OsString>, program: Vec<OsString>) -> u8 {
    let _ = INVOCATION.set(Invocation {
        argv: argv.clone(),
        program,
    });
    // Called by an FDB5 tool name (`fdb-list`, ...): its command line becomes fieldstore's.
    let Some(tool) = argv.first().and_then(|a| fdb_names::tool_name(a)) else {
        return report(execute(Cli::parse_from(argv)));
    };
    let rest: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match fdb_names::plan(&tool, &rest) {
        Ok(plan) => run_plan(plan),
        Err(e) => {
            eprintln!("fieldstore: error: {e}");
            1
        }
    }
}

/// An FDB5 tool call: its command lines in order, with the tolerances its flags ask for.
fn run_plan(plan: fdb_names::Plan) -> u8 {
    if let Some(q) = plan.info {
        let session = context::Session::new(q.config.map(PathBuf::from));
        return report(fdb_info::run(&q.items, q.all, &session));
    }
    for line in plan.lines {
        match execute(Cli::parse_from(line)) {
            Ok(()) => {}
            Err(e)
                if plan.ignore_not_found
                    && (exit::error_kind(&e) == Some(fieldstore::ErrorKind::NotFound)
                        || e.downcast_ref::<commands::store::NoEntries>().is_some()) => {}
            Err(e) if plan.ignore_errors => eprintln!("fieldstore: warning: {e:#}"),
            Err(e) => return report(Err(e)),
        }
    }
    0
}

fn execute(cli: Cli) -> anyhow::Result<()> {
    // A server's log is its record of clients and failures: info unless told otherwise.
    let quiet = if matches!(cli.command, Command::Server(_)) {
        "info"
    } else {
        "warn"
    };
    let filter = match cli.log_level {
        0 => quiet,
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FIELDSTORE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init()
        .ok();
    let mut session = context::Session::new(cli.config.clone());
    session.fdb5_output = cli.fdb5_output;
    match cli.command {
        Command::Info => commands::info::run(&session),
        Command::InstallFdbTools(a) => commands::fdb_tools::run(a),
        Command::Schema(c) => commands::schema::run(c, &session),
        Command::Request(c) => commands::request::run(c, &session),
        Command::Write(a) => commands::store::write(a, &session),
        Command::Read(a) => commands::store::read(a, &session),
        Command::Extract(a) => commands::extract::extract(a, &session),
        Command::ExtractIndex(a) => commands::extract_index::run(a, &session),
        Command::List(a) => commands::store::list(a, &session),
        Command::Watch(a) => commands::watch::run(a, &session),
        Command::Axes(a) => commands::store::axes(a, &session),
        Command::Where(a) => commands::store::where_(a, &session),
        Command::Sample(a) => commands::sample::run(a),
        Command::Wipe(a) => commands::store::wipe(a, &session),
        Command::Purge(a) => commands::store::purge(a, &session),
        Command::Stats(a) => commands::store::stats(a, &session),
        Command::Move(a) => commands::relocate::run(a, &session),
        Command::Lifecycle(c) => commands::lifecycle::run(c, &session),
        Command::Convert(a) => commands::convert::run(a, &session),
        Command::Adopt(a) => commands::adopt::run(a, &session),
        Command::Dump(a) => commands::store::dump(a, &session),
        Command::Compact { request } => commands::store::compact(request, &session),
        Command::Control(a) => commands::store::control(a, &session),
        Command::Check(a) => commands::store::check(a, &session),
        Command::Server(a) => commands::server::run(a, &session),
        Command::Hammer(a) => commands::hammer::run(a, &session),
        Command::Pipeline(c) => commands::pipeline::run(c, &session),
    }
}

/// `FIELDSTORE_S3_STATS=1` (hidden, for tests and benchmarks): one line of what this process's
/// S3 requests did, so conditional-write conflicts between writer processes can be counted.
fn print_s3_stats() {
    if std::env::var_os("FIELDSTORE_S3_STATS").is_none() {
        return;
    }
    let s = fieldstore::storage::s3::process_stats();
    eprintln!(
        "fieldstore: s3 stats: requests={} retries={} conflicts={} self_conflicts={} bytes_up={} bytes_down={}",
        s.requests, s.retries, s.conflicts, s.self_conflicts, s.bytes_up, s.bytes_down
    );
}

fn report(result: anyhow::Result<()>) -> u8 {
    print_s3_stats();
    match result {
        Ok(()) => 0,
        // `fieldstore list | head` is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            // The chain, without a backtrace: users need the cause, not our internals.
            eprintln!("fieldstore: error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            exit::failure(&e)
        }
    }
}
