//! Random damage to one file of a database (journal, schema, index or data file: bytes
//! flipped, cut short, zeroed, deleted, garbage appended), then every command must answer with
//! an error naming the damage or a correct answer (never bytes that were not written), and the
//! undamaged database beside it must stay fully readable and writable.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::run::{Fault, Outcome, Rng, Tally};
use super::store::{fields, files_under, lines, messages, Store, DB, OTHER};

pub struct Damage<'a> {
    template: Store,
    tally: &'a Tally,
    /// What each database holds: listed keys, and every field's bytes.
    db_lines: Vec<String>,
    db_fields: BTreeSet<Vec<u8>>,
    other_lines: Vec<String>,
    other_bytes: Vec<u8>,
    new_field: PathBuf,
    new_bytes: Vec<u8>,
}

impl<'a> Damage<'a> {
    /// The template: DB from three flushes (steps 0, 1, 2), OTHER from one.
    pub fn new(template: Store, tally: &'a Tally) -> Damage<'a> {
        let mut db_fields = BTreeSet::new();
        for step in ["0", "1", "2"] {
            let f = template.sample(tally, &format!("s{step}.grib"), step, "20261122");
            db_fields.extend(messages(&std::fs::read(&f).unwrap()).unwrap());
            template.ok(tally, "local.yaml", &["write", f.to_str().unwrap()]);
        }
        let o = template.sample(tally, "other.grib", "0/1", "20261123");
        template.ok(tally, "local.yaml", &["write", o.to_str().unwrap()]);
        let new_field = template.sample(tally, "new.grib", "9", "20261122");
        Damage {
            db_lines: template.list(tally, "local.yaml", DB),
            other_lines: template.list(tally, "local.yaml", OTHER),
            other_bytes: std::fs::read(o).unwrap(),
            new_bytes: std::fs::read(&new_field).unwrap(),
            new_field,
            db_fields,
            template,
            tally,
        }
    }

    /// Each round damages a fresh copy of the pristine root at the same path (indexes name
    /// their data files by absolute path).
    pub fn run(&self, rounds: u64, rng: &mut Rng, seed: u64) {
        let (root, pristine) = (self.template.path("root"), self.template.path("pristine"));
        copy_tree(&root, &pristine);
        for round in 0..rounds {
            let mut rng = rng.fork();
            let _ = std::fs::remove_dir_all(&root);
            copy_tree(&pristine, &root);
            let store = &self.template;
            let db_dir = files_under(&root)
                .into_iter()
                .find(|p| p.ends_with("toc") && p.to_string_lossy().contains("20261122"))
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap();
            let files = files_under(&db_dir);
            let victim = rng.pick(&files).clone();
            let how = damage(&victim, &mut rng);
            self.tally.add(&self.tally.damaged_files, 1);
            let name = victim.file_name().unwrap().to_string_lossy().into_owned();
            let context = format!("seed={seed} damage round {round} ({how} {name})");
            let faults = self.tally.faults.lock().unwrap().len();
            // A journal cut short is a shorter history: a truncation at a record boundary
            // cannot be told from fewer flushes, and a cut record is a torn tail, which readers
            // ignore (docs/toc-format.md). Finding nothing is then the correct answer.
            let cut_journal = name == "toc" && how.starts_with("truncated");
            self.judge(store, &db_dir, &victim, cut_journal, &mut rng, &context);
            self.tally.add(&self.tally.rounds, 1);
            super::run::progress("damage", round, rounds);
            if self.tally.faults.lock().unwrap().len() > faults {
                let kept = store.path(&format!("kept-round{round}"));
                copy_tree(&root, &kept);
                eprintln!("torture: damaged store kept in {}", kept.display());
            }
        }
    }

    fn judge(
        &self,
        s: &Store,
        db_dir: &Path,
        victim: &Path,
        cut_journal: bool,
        rng: &mut Rng,
        context: &str,
    ) {
        let t = self.tally;
        let mut names = vec![
            victim.file_name().unwrap().to_string_lossy().into_owned(),
            db_dir.file_name().unwrap().to_string_lossy().into_owned(),
        ];
        if cut_journal {
            names.push("nothing matches".into());
        }
        let out = s.path("out.grib");
        let out_s = out.to_str().unwrap();
        let all = fields(DB, "0/1/2");
        // Commands that only must not crash, and must name the damage when they refuse: one a
        // round, so that a round costs few processes and every command comes up over the rounds.
        let args = *rng.pick(&[
            &["axes", DB][..],
            &["dump", DB],
            &["stats", DB],
            &["where", DB],
            &["purge", DB],
            &["list", "class=od", "--porcelain"],
        ]);
        let o = s.run(t, context, "local.yaml", args);
        self.named_if_refused(&o, &names, context, args);
        let check_db = |phase: &str| {
            let o = s.run(t, context, "local.yaml", &["list", DB, "--porcelain"]);
            self.named_if_refused(&o, &names, context, &["list", DB]);
            if o.ok() {
                for l in lines(&o.stdout) {
                    if !self.db_lines.contains(&l) {
                        t.fault(
                            Fault::Violation,
                            format!("{context}: {phase}list shows a field never written: {l}"),
                        );
                    }
                }
            }
            let _ = std::fs::remove_file(&out);
            let o = s.run(t, context, "local.yaml", &["read", &all, out_s]);
            self.named_if_refused(&o, &names, context, &["read", &all]);
            if o.ok() {
                self.only_written(&std::fs::read(&out).unwrap_or_default(), context, phase);
            }
        };
        check_db("");
        let then = rng.below(3);
        if then == 0 {
            // Compaction over the damage must not turn it into wrong answers either.
            let o = s.run(t, context, "local.yaml", &["compact", DB]);
            self.named_if_refused(&o, &names, context, &["compact", DB]);
            check_db("after compact: ");
        }
        // A write into the damaged database: refused, or durable and read back exactly.
        let nf = self.new_field.to_str().unwrap();
        let o = if then == 1 {
            s.run(t, context, "local.yaml", &["write", nf])
        } else {
            Outcome {
                status: None,
                stdout: Vec::new(),
                stderr: String::new(),
            }
        };
        self.named_if_refused(&o, &names, context, &["write", "new.grib"]);
        if o.ok() {
            let _ = std::fs::remove_file(&out);
            let req = fields(DB, "9");
            let r = s.run(t, context, "local.yaml", &["read", &req, out_s]);
            if !r.ok() || std::fs::read(&out).unwrap_or_default() != self.new_bytes {
                t.fault(
                    Fault::Violation,
                    format!(
                        "{context}: a write into the damaged database succeeded but its field \
                         does not read back: {}",
                        r.stderr
                    ),
                );
            }
        }
        // The neighbour is untouched: fully listed, read byte for byte, and still writable. A
        // listing may still report the damaged database beside it (a journal whose key cannot
        // be read might match any request), as long as it names it.
        let o = s.run(t, context, "local.yaml", &["list", OTHER, "--porcelain"]);
        self.named_if_refused(&o, &names, context, &["list", OTHER]);
        let _ = std::fs::remove_file(&out);
        let r = s.run(
            t,
            context,
            "local.yaml",
            &["read", &fields(OTHER, "0/1"), out_s],
        );
        if lines(&o.stdout) != self.other_lines
            || !r.ok()
            || std::fs::read(&out).unwrap_or_default() != self.other_bytes
        {
            t.fault(
                Fault::Violation,
                format!(
                    "{context}: the undamaged database is not fully readable: {} {}",
                    o.stderr, r.stderr
                ),
            );
        }
        if !rng.chance(25) {
            return;
        }
        let f = self.template.path("other.grib");
        let w = s.run(t, context, "local.yaml", &["write", f.to_str().unwrap()]);
        if !w.ok() {
            t.fault(
                Fault::Violation,
                format!(
                    "{context}: the undamaged database refuses a write: {}",
                    w.stderr
                ),
            );
        }
    }

    /// Every message read must be one that was written, once.
    fn only_written(&self, bytes: &[u8], context: &str, phase: &str) {
        let msgs = match messages(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.tally.fault(
                    Fault::Violation,
                    format!("{context}: {phase}read succeeded with bytes that are not GRIB: {e}"),
                );
                return;
            }
        };
        let distinct: BTreeSet<&Vec<u8>> = msgs.iter().collect();
        let wrong = msgs.iter().filter(|m| !self.db_fields.contains(*m)).count();
        if wrong > 0 || distinct.len() != msgs.len() {
            self.tally.fault(
                Fault::Violation,
                format!(
                    "{context}: {phase}read succeeded with {wrong} of {} fields never written \
                     (or repeated)",
                    msgs.len()
                ),
            );
        }
    }

    /// A refusal must say what is damaged: the file, or at least its database (or, for a
    /// journal cut short, may say that nothing matches).
    fn named_if_refused(&self, o: &Outcome, names: &[String], context: &str, args: &[&str]) {
        if o.status.is_none() || o.ok() {
            return;
        }
        self.tally.add(&self.tally.damage_errors, 1);
        if !names.iter().any(|n| o.stderr.contains(n.as_str())) {
            self.tally.fault(
                Fault::Violation,
                format!(
                    "{context}: '{}' refused without naming the damaged file or database: {}",
                    args.join(" "),
                    o.stderr.trim()
                ),
            );
        }
    }
}

/// Damages `file` one of five ways; says which.
fn damage(file: &Path, rng: &mut Rng) -> String {
    let mut bytes = std::fs::read(file).unwrap_or_default();
    let n = bytes.len();
    let how = match rng.below(5) {
        0 if n > 0 => {
            let k = 1 + rng.usize(8);
            for _ in 0..k {
                let at = rng.usize(n);
                bytes[at] ^= 1 << rng.below(8);
            }
            format!("flipped {k} bits of")
        }
        1 if n > 0 => {
            let at = rng.usize(n);
            bytes.truncate(at);
            format!("truncated to {at} bytes")
        }
        2 if n > 0 => {
            let at = rng.usize(n);
            let len = 1 + rng.usize((n - at).min(512));
            bytes[at..at + len].fill(0);
            format!("zeroed {len} bytes at {at} of")
        }
        3 => {
            std::fs::remove_file(file).unwrap();
            return "deleted".into();
        }
        _ => {
            let len = 1 + rng.usize(200);
            bytes.extend(rng.bytes(len));
            format!("appended {len} garbage bytes to")
        }
    };
    std::fs::write(file, bytes).unwrap();
    how
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let dest = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}
