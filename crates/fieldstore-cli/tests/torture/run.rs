//! What every torture phase shares: a seeded generator, the tally of figures and violations,
//! and commands run as real processes with a time bound, judged by how they ended (a signal we
//! did not send is a crash, "panicked at" on stderr a panic, running past the bound a hang).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest any one command may take before it counts as a hang (generous: 2 busy cores).
pub const COMMAND_BOUND: Duration = Duration::from_secs(60);

/// splitmix64: small, seedable, the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn usize(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.usize(from.len())]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// A generator of its own for one round, so rounds replay independently of each other.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next())
    }
}

/// Faults already reported and not fixed yet (docs/torture.md): the stderr signature, and what
/// it is. They are counted and printed as known, not failed on, so the rest of the run still
/// guards against new faults; a fix removes its line here (and the run then fails if it comes
/// back). Empty: the one found (an ecCodes assertion on a damaged GRIB 1 message,
/// `found/sigabrt-g1forecastmonth.grib`) is an error since ecCodes' assertions are caught.
pub const KNOWN: &[(&str, &str)] = &[];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Violation,
    Panic,
    Crash,
    Hang,
}

/// Figures of a run, shared by the phases (some run threads).
#[derive(Default)]
pub struct Tally {
    pub rounds: AtomicU64,
    pub kills_writers: AtomicU64,
    pub kills_compactors: AtomicU64,
    pub kills_servers: AtomicU64,
    pub damaged_files: AtomicU64,
    pub damage_errors: AtomicU64,
    pub random_inputs: AtomicU64,
    pub commands: AtomicU64,
    pub clients: AtomicU64,
    pub faults: Mutex<Vec<(Fault, String)>>,
    /// Faults matching [`KNOWN`]: (fault, which known issue, reproducer).
    pub known: Mutex<Vec<(Fault, &'static str, String)>>,
}

impl Tally {
    pub fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self, counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Records a fault with what replays it; printed at once (the run goes on to find more).
    pub fn fault(&self, fault: Fault, reproducer: String) {
        if let Some((_, what)) = KNOWN.iter().find(|(sig, _)| reproducer.contains(sig)) {
            eprintln!("torture: known issue ({what}), {fault:?}: {reproducer}");
            self.known.lock().unwrap().push((fault, what, reproducer));
            return;
        }
        eprintln!("torture: {fault:?}: {reproducer}");
        self.faults.lock().unwrap().push((fault, reproducer));
    }

    pub fn count(&self, fault: Fault) -> usize {
        self.faults
            .lock()
            .unwrap()
            .iter()
            .filter(|(f, _)| *f == fault)
            .count()
    }
}

/// How one command ended.
pub struct Outcome {
    pub status: Option<ExitStatus>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// A process started by a phase, its output in files (a pipe nobody reads could block it).
pub struct Proc {
    pub child: Child,
    pub what: String,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Proc {
    pub fn spawn(mut cmd: Command, dir: &Path, what: String) -> Proc {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let (out, err) = (dir.join(format!("p{n}.out")), dir.join(format!("p{n}.err")));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Proc {
            child,
            what,
            out,
            err,
            started: Instant::now(),
        }
    }

    /// SIGKILL; whether it had already ended shows in the outcome's status.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits (within the bound), then judges the ending: `killed` says we sent SIGKILL, so that
    /// signal is expected; any other signal is a crash.
    pub fn finish(mut self, tally: &Tally, killed: bool, context: &str) -> Outcome {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if self.started.elapsed() > COMMAND_BOUND => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    tally.fault(
                        Fault::Hang,
                        format!("{context}: {} ran over {COMMAND_BOUND:?}", self.what),
                    );
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => panic!("waiting for {}: {e}", self.what),
            }
        };
        tally.add(&tally.commands, 1);
        let stdout = std::fs::read(&self.out).unwrap_or_default();
        let stderr =
            String::from_utf8_lossy(&std::fs::read(&self.err).unwrap_or_default()).into_owned();
        let _ = std::fs::remove_file(&self.out);
        let _ = std::fs::remove_file(&self.err);
        if let Some(sig) = status.and_then(|s| s.signal()) {
            if !(killed && sig == 9) {
                tally.fault(
                    Fault::Crash,
                    format!("{context}: {} died by signal {sig}: {stderr}", self.what),
                );
            }
        }
        if stderr.contains("panicked at") {
            tally.fault(
                Fault::Panic,
                format!("{context}: {} panicked: {stderr}", self.what),
            );
        }
        Outcome {
            status,
            stdout,
            stderr,
        }
    }
}

/// Runs a command to its end (within the bound) and judges it.
pub fn run(cmd: Command, dir: &Path, what: String, tally: &Tally, context: &str) -> Outcome {
    Proc::spawn(cmd, dir, what).finish(tally, false, context)
}

/// A number from the environment, or the default.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Ten lines over a long phase, so a long run shows where it is.
pub fn progress(phase: &str, round: u64, of: u64) {
    if of >= 500 && (round + 1).is_multiple_of(of / 10) {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "torture: {phase} {} of {of}", round + 1);
    }
}
