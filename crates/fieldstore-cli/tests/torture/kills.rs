//! Kill -9 at random moments of writers, compactors (compact, purge --doit, wipe --doit) and
//! servers with remote clients mid-archive and mid-read, checking after every round that no
//! flushed field was lost or changed, no unflushed one is visible, and flushes are whole.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use super::run::{Fault, Outcome, Proc, Rng, Tally};
use super::store::{fields, lines, messages, step_of, Store, DB, OTHER};

const TOKEN: &str = "torture-token";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Its writer was killed or failed: all four fields or none may be visible.
    Maybe,
    /// Its writer said it flushed (or all four were seen): they must stay, byte for byte.
    Flushed,
}

pub struct Kills<'a> {
    store: Store,
    tally: &'a Tally,
    /// Per round (= step): the four fields its writer wrote, and what may be visible.
    rounds: Vec<(Vec<u8>, Option<Seen>)>,
    other: Vec<u8>,
    other_present: bool,
}

impl<'a> Kills<'a> {
    pub fn new(store: Store, tally: &'a Tally, rounds: usize) -> Kills<'a> {
        let steps: Vec<String> = (0..rounds).map(|r| r.to_string()).collect();
        let pool = store.sample(tally, "pool.grib", &steps.join("/"), "20261122");
        let all = messages(&std::fs::read(pool).unwrap()).unwrap();
        assert_eq!(all.len(), rounds * 4);
        let rounds = all
            .chunks(4)
            .enumerate()
            .map(|(r, four)| {
                let bytes = four.concat();
                std::fs::write(store.path(&format!("r{r}.grib")), &bytes).unwrap();
                (bytes, None)
            })
            .collect();
        let other = std::fs::read(store.sample(tally, "other.grib", "0", "20261123")).unwrap();
        Kills {
            store,
            tally,
            rounds,
            other,
            other_present: false,
        }
    }

    /// Rounds whose fields ended visible, and rounds killed before their flush.
    pub fn outcomes(&self) -> (usize, usize) {
        let whole = self.flushed().len();
        (
            whole,
            self.rounds
                .iter()
                .filter(|r| r.1 == Some(Seen::Maybe))
                .count(),
        )
    }

    pub fn run(&mut self, rng: &mut Rng, seed: u64) {
        for r in 0..self.rounds.len() {
            let mut rng = rng.fork();
            let kind = rng.below(4);
            let context = format!("seed={seed} kill round {r}");
            match kind {
                0 | 1 => self.writer_round(r, &mut rng, &context),
                2 => self.compactor_round(r, &mut rng, &context),
                _ => self.server_round(r, &mut rng, &context),
            }
            self.tally.add(&self.tally.rounds, 1);
            super::run::progress("kill rounds", r as u64, self.rounds.len() as u64);
            self.check(&context, r % 8 == 7 || r + 1 == self.rounds.len());
        }
    }

    fn writer(&self, config: &str, r: usize) -> Proc {
        let f = self.store.path(&format!("r{r}.grib"));
        Proc::spawn(
            self.store.cmd(config, &["write", f.to_str().unwrap()]),
            &self.store.dir,
            format!("fieldstore --config {config} write r{r}.grib"),
        )
    }

    /// Records what a writer's ending says about round `r`.
    fn settle(&mut self, r: usize, o: &Outcome) {
        self.rounds[r].1 = Some(if o.ok() { Seen::Flushed } else { Seen::Maybe });
    }

    fn writer_round(&mut self, r: usize, rng: &mut Rng, context: &str) {
        let mut w = self.writer("local.yaml", r);
        std::thread::sleep(moment(rng));
        w.kill();
        let o = w.finish(self.tally, true, context);
        if killed(&o) {
            self.tally.add(&self.tally.kills_writers, 1);
        }
        self.settle(r, &o);
    }

    fn compactor_round(&mut self, r: usize, rng: &mut Rng, context: &str) {
        let what: &[&str] = match rng.below(3) {
            0 => &["compact", DB],
            1 => &["purge", DB, "--doit"],
            _ => {
                if !self.other_present {
                    let f = self.store.path("other.grib");
                    self.store
                        .ok(self.tally, "local.yaml", &["write", f.to_str().unwrap()]);
                    self.other_present = true;
                }
                &["wipe", OTHER, "--doit"]
            }
        };
        let mut c = Proc::spawn(
            self.store.cmd("local.yaml", what),
            &self.store.dir,
            format!("fieldstore {}", what.join(" ")),
        );
        let mut w = self.writer("local.yaml", r);
        let (dc, dw) = (
            moment(rng).as_millis() as u64 / 4,
            moment(rng).as_millis() as u64,
        );
        std::thread::sleep(Duration::from_millis(dc.min(dw)));
        if dc <= dw {
            c.kill();
        } else {
            w.kill();
        }
        std::thread::sleep(Duration::from_millis(dc.abs_diff(dw)));
        c.kill();
        w.kill();
        let co = c.finish(self.tally, true, context);
        if killed(&co) {
            self.tally.add(&self.tally.kills_compactors, 1);
        }
        let wo = w.finish(self.tally, true, context);
        if killed(&wo) {
            self.tally.add(&self.tally.kills_writers, 1);
        }
        self.settle(r, &wo);
        if what[0] == "wipe" {
            self.check_other(context, co.ok());
        }
    }

    /// A killed wipe leaves the other database whole or gone; a finished one, gone.
    fn check_other(&mut self, context: &str, wiped: bool) {
        let o = self.store.run(
            self.tally,
            context,
            "local.yaml",
            &["list", OTHER, "--porcelain"],
        );
        let n = lines(&o.stdout).len();
        if !o.ok() || !(n == 0 || n == 4) || (wiped && n != 0) {
            self.tally.fault(
                Fault::Violation,
                format!(
                    "{context}: after wipe (finished: {wiped}) 'list {OTHER}' gave {n} fields, \
                     status {:?}: {}",
                    o.status, o.stderr
                ),
            );
        }
        if n == 4 {
            let out = self.store.path("other-back.grib");
            let req = fields(OTHER, "0");
            let o = self.store.run(
                self.tally,
                context,
                "local.yaml",
                &["read", &req, out.to_str().unwrap()],
            );
            if !o.ok() || std::fs::read(&out).unwrap_or_default() != self.other {
                self.tally.fault(
                    Fault::Violation,
                    format!("{context}: a half-wiped database reads wrong: {}", o.stderr),
                );
            }
        }
        self.other_present = n == 4;
        if !self.other_present && o.ok() {
            // A killed wipe must be finishable: what remains of the database goes too.
            let o = self.store.run(
                self.tally,
                context,
                "local.yaml",
                &["wipe", OTHER, "--doit"],
            );
            if !o.ok() && !o.stderr.contains("match") {
                self.tally.fault(
                    Fault::Violation,
                    format!(
                        "{context}: wiping what a killed wipe left failed: {}",
                        o.stderr
                    ),
                );
            }
        }
    }

    fn server_round(&mut self, r: usize, rng: &mut Rng, context: &str) {
        let flushed: Vec<usize> = self.flushed();
        let mut server = crate::server::start(
            self.store.cmd(
                "local.yaml",
                &["server", "--listen", "127.0.0.1:0", "--token", TOKEN],
            ),
            &self.store.dir,
            TOKEN,
        );
        let w = self.writer("remote.yaml", r);
        let out = self.store.path("remote-read.grib");
        let reader = (!flushed.is_empty()).then(|| {
            let req = fields(DB, &join(&flushed));
            Proc::spawn(
                self.store
                    .cmd("remote.yaml", &["read", &req, out.to_str().unwrap()]),
                &self.store.dir,
                format!("fieldstore --config remote.yaml read '{req}' remote-read.grib"),
            )
        });
        std::thread::sleep(moment(rng));
        match server.child.try_wait() {
            Ok(Some(status)) => self.tally.fault(
                Fault::Crash,
                format!("{context}: the server ended by itself: {status:?}"),
            ),
            _ => self.tally.add(&self.tally.kills_servers, 1),
        }
        let _ = server.child.kill();
        let _ = server.child.wait();
        drop(server);
        let wo = w.finish(self.tally, false, context);
        self.settle(r, &wo);
        if let Some(reader) = reader {
            let ro = reader.finish(self.tally, false, context);
            let want: Vec<u8> = flushed
                .iter()
                .flat_map(|&s| self.rounds[s].0.clone())
                .collect();
            if ro.ok() && std::fs::read(&out).unwrap_or_default() != want {
                self.tally.fault(
                    Fault::Violation,
                    format!("{context}: a remote read that succeeded returned wrong bytes"),
                );
            }
        }
        let log = std::fs::read_to_string(self.store.path("server.log")).unwrap_or_default();
        if log.contains("panicked at") {
            self.tally
                .fault(Fault::Panic, format!("{context}: server panicked: {log}"));
        }
        let _ = std::fs::remove_file(self.store.path("server.log"));
    }

    fn flushed(&self) -> Vec<usize> {
        (0..self.rounds.len())
            .filter(|&s| self.rounds[s].1 == Some(Seen::Flushed))
            .collect()
    }

    /// The invariants after a round: each round's four fields visible whole or not at all,
    /// always when flushed, never when not written; with `bytes`, every flushed field read
    /// back byte for byte.
    fn check(&mut self, context: &str, bytes: bool) {
        let o = self.store.run(
            self.tally,
            context,
            "local.yaml",
            &["list", DB, "--porcelain"],
        );
        if !o.ok() {
            self.tally.fault(
                Fault::Violation,
                format!("{context}: 'list {DB}' fails after the round: {}", o.stderr),
            );
            return;
        }
        let mut count = vec![0usize; self.rounds.len()];
        for l in lines(&o.stdout) {
            match step_of(&l) {
                Some(s) if (s as usize) < count.len() => count[s as usize] += 1,
                _ => self.tally.fault(
                    Fault::Violation,
                    format!("{context}: a field never written: {l}"),
                ),
            }
        }
        for (s, &n) in count.iter().enumerate() {
            let seen = self.rounds[s].1;
            let bad = match seen {
                None => n != 0,
                Some(Seen::Maybe) => n != 0 && n != 4,
                Some(Seen::Flushed) => n != 4,
            };
            if bad {
                let what = match seen {
                    None => "never written",
                    Some(Seen::Maybe) => "killed writer",
                    Some(Seen::Flushed) => "flushed",
                };
                self.tally.fault(
                    Fault::Violation,
                    format!("{context}: round {s} ({what}): {n} of 4 fields visible"),
                );
            }
            if n == 4 {
                self.rounds[s].1 = Some(Seen::Flushed);
            }
        }
        if !bytes {
            return;
        }
        let flushed = self.flushed();
        if flushed.is_empty() {
            return;
        }
        let out = self.store.path("check.grib");
        let req = fields(DB, &join(&flushed));
        let o = self.store.run(
            self.tally,
            context,
            "local.yaml",
            &["read", &req, out.to_str().unwrap()],
        );
        let got = std::fs::read(&out).unwrap_or_default();
        let want: Vec<u8> = flushed
            .iter()
            .flat_map(|&s| self.rounds[s].0.clone())
            .collect();
        if !o.ok() || got != want {
            self.tally.fault(
                Fault::Violation,
                format!(
                    "{context}: flushed fields read back {} bytes, want {} (steps {}): {}",
                    got.len(),
                    want.len(),
                    join(&flushed),
                    o.stderr
                ),
            );
        }
    }
}

/// When to kill: a process's start, its work, or around its end (a write of four fields takes
/// tens to hundreds of milliseconds on busy cores), each a third of the time.
fn moment(rng: &mut Rng) -> Duration {
    Duration::from_millis(match rng.below(3) {
        0 => rng.below(20),
        1 => 20 + rng.below(130),
        _ => 150 + rng.below(450),
    })
}

fn killed(o: &Outcome) -> bool {
    o.status.and_then(|s| s.signal()) == Some(9)
}

fn join(steps: &[usize]) -> String {
    steps
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join("/")
}
