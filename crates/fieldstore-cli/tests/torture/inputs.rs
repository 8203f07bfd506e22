//! Random inputs through the CLI and through a server: requests (random keywords and values,
//! unicode, huge, empty, ranges), config YAML, schema text, and GRIB bytes (mutations of real
//! messages and samples). Any answer is fine, error or not; a crash, panic, hang or a server
//! that stops serving is not.

use std::path::PathBuf;

use super::run::{run, Fault, Rng, Tally};
use super::store::{files_under, messages, shell_words, Store};

const TOKEN: &str = "torture-token";

const KEYS: &[&str] = &[
    "class",
    "expver",
    "stream",
    "date",
    "time",
    "type",
    "levtype",
    "levelist",
    "param",
    "step",
    "number",
    "domain",
    "hdate",
    "grid",
    "area",
    "frequency",
    "direction",
    "fcmonth",
    "iteration",
    "channel",
    "time",
    "STEP",
    "Param",
    "",
    " ",
    "x",
    "é",
    "日付",
    "🌧",
    "a b",
    "k=v",
    "-",
];
const VALUES: &[&str] = &[
    "od",
    "0001",
    "oper",
    "20261122",
    "1200",
    "fc",
    "pl",
    "1000",
    "500",
    "t",
    "u",
    "130",
    "130.128",
    "2t",
    "0",
    "6",
    "all",
    "off",
    "-1",
    "-0",
    "1e308",
    "NaN",
    "inf",
    "",
    " ",
    "é",
    "日本",
    "🌧",
    "\u{202e}rtl",
    "e\u{301}",
    "t/u/v",
    "to",
    "by",
    "0/to",
    "to/10",
    "0/to/10/by/0",
    "0/to/-5",
    "99999999999999999999",
    "20261301",
    "2026-11-22",
    "-1/to/-10/by/-1",
    "1/by/2",
    "//",
    "/",
    "0/to/48/by/6",
    "1/to/1000/by/1",
    "0000",
    "1.5",
    "0x10",
    "%",
    "'",
    "\"",
    "\\",
    "*",
];
const VERBS: &[&str] = &["", "retrieve,", "list,", "archive,", "RETRIEVE,", "x,", ","];
const COMMANDS: &[&[&str]] = &[
    &["list"],
    &["list", "--full", "--porcelain"],
    &["axes"],
    &["where"],
    &["stats"],
    &["dump"],
    &["wipe"],
    &["purge"],
    &["read"],
    &["request", "expand"],
    &["control", "status"],
];

pub struct Inputs<'a> {
    store: Store,
    tally: &'a Tally,
    server: Option<crate::server::Served>,
    schema: String,
    config: String,
    gribs: Vec<Vec<u8>>,
}

impl<'a> Inputs<'a> {
    pub fn new(store: Store, tally: &'a Tally, real_grib: PathBuf) -> Inputs<'a> {
        let s = store.sample(tally, "a.grib", "0/6", "20261122");
        store.ok(tally, "local.yaml", &["write", s.to_str().unwrap()]);
        let mut gribs = messages(&std::fs::read(&s).unwrap()).unwrap();
        for f in files_under(&real_grib) {
            if f.extension().is_some_and(|e| e == "grib") {
                // The corrupted sample file holds messages ecCodes refuses: take what frames.
                if let Ok(m) = messages(&std::fs::read(&f).unwrap()) {
                    gribs.extend(m.into_iter().take(3));
                }
            }
        }
        let schema = String::from_utf8(store.ok(tally, "local.yaml", &["schema", "show"])).unwrap();
        let config = std::fs::read_to_string(store.path("local.yaml")).unwrap();
        Inputs {
            store,
            tally,
            server: None,
            schema,
            config,
            gribs,
        }
    }

    /// Every input a run once found a fault with (`tests/torture/found/`), through the CLI and
    /// through a server, before the random ones: a fixed fault that comes back fails the run.
    pub fn replay_found(&mut self, found: &std::path::Path, seed: u64) {
        for f in files_under(found) {
            let context = format!("seed={seed} found input {}", f.display());
            let bytes = std::fs::read(&f).unwrap();
            self.store.run(
                self.tally,
                &context,
                "local.yaml",
                &["write", f.to_str().unwrap()],
            );
            self.ensure_server(&context);
            self.archive_through_server(&bytes);
            // A server that lost the connection may still be dying: judge it, not the next input.
            std::thread::sleep(std::time::Duration::from_millis(300));
            self.server_alive(&context);
            self.tally.add(&self.tally.random_inputs, 1);
        }
    }

    /// Archives bytes without a key through a server, which then reads the key itself (the CLI
    /// would read it in the client): what a raw client can make the server decode.
    fn archive_through_server(&mut self, bytes: &[u8]) {
        let Some(port) = self.server.as_ref().map(|s| s.port) else {
            return;
        };
        let fdb = fieldstore::remote::RemoteFdb::new("127.0.0.1", port, Some(TOKEN.into()));
        use fieldstore::api::Fdb as _;
        if fdb.archive(None, bytes).is_ok() {
            let _ = fdb.flush();
        }
        self.tally.add(&self.tally.commands, 1);
    }

    pub fn run(&mut self, inputs: u64, rng: &mut Rng, seed: u64) {
        for n in 0..inputs {
            let mut rng = rng.fork();
            let context = format!("seed={seed} input {n}");
            let remote = rng.chance(40);
            let config = if remote {
                self.ensure_server(&context);
                "remote.yaml"
            } else {
                "local.yaml"
            };
            let faults = self.tally.faults.lock().unwrap().len();
            let kept = match rng.below(10) {
                0..=4 => self.request(&mut rng, config, &context),
                5 => self.yaml(&mut rng, &context),
                6 => self.schema(&mut rng, &context),
                _ => self.grib(&mut rng, config, &context),
            };
            self.tally.add(&self.tally.random_inputs, 1);
            super::run::progress("random inputs", n, inputs);
            if remote {
                self.server_alive(&context);
            }
            if self.tally.faults.lock().unwrap().len() > faults {
                if let Some(k) = kept {
                    let to = self.store.path(&format!("kept-input{n}"));
                    let _ = std::fs::copy(&k, &to);
                    eprintln!("torture: input kept in {}", to.display());
                }
            }
        }
        self.server_alive("end of random inputs");
    }

    fn ensure_server(&mut self, context: &str) {
        if self.server.as_mut().is_some_and(|s| s.is_running()) {
            return;
        }
        self.server_alive(context);
        self.server = Some(crate::server::start(
            self.store.cmd(
                "local.yaml",
                &["server", "--listen", "127.0.0.1:0", "--token", TOKEN],
            ),
            &self.store.dir,
            TOKEN,
        ));
    }

    /// A server that ended by itself, or panicked, is a fault; its log is cleared after.
    fn server_alive(&mut self, context: &str) {
        let log = std::fs::read_to_string(self.store.path("server.log")).unwrap_or_default();
        let mut tail = log.len().saturating_sub(4000);
        while !log.is_char_boundary(tail) {
            tail += 1;
        }
        let log = &log[tail..];
        if let Some(s) = self.server.as_mut() {
            if let Ok(Some(status)) = s.child.try_wait() {
                self.tally.fault(
                    Fault::Crash,
                    format!("{context}: the server died ({status:?}): {log}"),
                );
                self.server = None;
            }
        }
        if log.contains("panicked at") {
            self.tally.fault(
                Fault::Panic,
                format!("{context}: the server panicked: {log}"),
            );
        }
        // Judged once: a later fault must not be matched against this server's log.
        if self.server.is_none() || log.len() > 1 << 20 || log.contains("panicked at") {
            let _ = std::fs::write(self.store.path("server.log"), "");
        }
    }

    fn request(&mut self, rng: &mut Rng, config: &str, context: &str) -> Option<PathBuf> {
        let req = random_request(rng);
        let cmd = rng.pick(COMMANDS);
        let mut args: Vec<&str> = cmd.to_vec();
        let control = cmd[0] == "control";
        let out = self.store.path("out.grib");
        let out_s = out.to_str().unwrap().to_string();
        if control {
            args.push(&req);
        } else {
            let at = if cmd[0] == "list" { 1 } else { args.len() };
            args.insert(at, &req);
        }
        if cmd[0] == "read" {
            args.push(&out_s);
        }
        let file = self.store.path("last-request.txt");
        std::fs::write(&file, shell_words(&args)).unwrap();
        let what = format!("fieldstore --config {config} {}", cut(&shell_words(&args)));
        run(
            self.store.cmd(config, &args),
            &self.store.dir,
            what,
            self.tally,
            context,
        );
        Some(file)
    }

    fn yaml(&mut self, rng: &mut Rng, context: &str) -> Option<PathBuf> {
        let text = match rng.below(4) {
            0 => mutate(self.config.as_bytes(), rng),
            1 => format!(
                "{}{}",
                "[".repeat(1 + rng.usize(100_000)),
                "]".repeat(rng.usize(3))
            )
            .into_bytes(),
            2 => {
                let keys = [
                    "type", "spaces", "roots", "path", "schema", "engine", "fdbs", "host", "port",
                    "token", "lanes", "select", "store", "filter", "&a", "*a", "!!binary", "<<",
                ];
                let mut s = String::new();
                for _ in 0..rng.usize(12) {
                    let indent = " ".repeat(rng.usize(6));
                    let v = rng.pick(VALUES);
                    s.push_str(&format!("{indent}{}: {}\n", rng.pick(&keys), v));
                    if rng.chance(20) {
                        s.push_str(&format!("{indent}- {}\n", rng.pick(&keys)));
                    }
                }
                s.into_bytes()
            }
            _ => {
                // Aliases that expand exponentially (a "billion laughs").
                let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
                for i in 0..(1 + rng.usize(9)) {
                    let prev = if i == 0 {
                        "a".to_string()
                    } else {
                        format!("a{}", i - 1)
                    };
                    s.push_str(&format!("a{i}: &a{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
                }
                s.push_str(&self.config);
                s.into_bytes()
            }
        };
        let file = self.store.path("random.yaml");
        std::fs::write(&file, &text).unwrap();
        let args: &[&str] = match rng.below(3) {
            0 => &["info"],
            1 => &["list", "class=od"],
            _ => &["where", "class=od"],
        };
        self.store.run(self.tally, context, "random.yaml", args);
        Some(file)
    }

    fn schema(&mut self, rng: &mut Rng, context: &str) -> Option<PathBuf> {
        let text = if rng.chance(70) {
            mutate(self.schema.as_bytes(), rng)
        } else {
            let tokens = [
                "[", "]", "[ class", ", ", "?", "=", "/", ";", ":", "Param", "Step", "Date",
                "Double", "Integer", "-", "#", "\n", "expver", "step", "param", "é", "🌧",
            ];
            (0..rng.usize(200))
                .map(|_| *rng.pick(&tokens))
                .collect::<String>()
                .into_bytes()
        };
        let file = self.store.path("random.schema");
        std::fs::write(&file, &text).unwrap();
        if rng.chance(50) {
            self.store.run(
                self.tally,
                context,
                "local.yaml",
                &["schema", "check", file.to_str().unwrap()],
            );
        } else {
            std::fs::write(
                self.store.path("schema.yaml"),
                format!(
                    "type: local\nschema: {}\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                    file.display(),
                    self.store.path("schema-root").display()
                ),
            )
            .unwrap();
            let a = self.store.path("a.grib");
            let args: &[&str] = if rng.chance(50) {
                &["write", a.to_str().unwrap()]
            } else {
                &["list", "class=od"]
            };
            self.store.run(self.tally, context, "schema.yaml", args);
        }
        Some(file)
    }

    fn grib(&mut self, rng: &mut Rng, config: &str, context: &str) -> Option<PathBuf> {
        let base = rng.pick(&self.gribs).clone();
        let bytes = match rng.below(6) {
            0 => {
                // The headers (sections 0 to 4) are where the decoder looks.
                let mut b = base.clone();
                for _ in 0..1 + rng.usize(6) {
                    let at = rng.usize(b.len().min(200));
                    b[at] = rng.next() as u8;
                }
                b
            }
            1 => {
                let mut b = base.clone();
                b.truncate(rng.usize(b.len()));
                b
            }
            2 => {
                // The total length (edition 1: bytes 4..7; edition 2: bytes 8..16).
                let mut b = base.clone();
                let (from, to) = if b.get(7) == Some(&2) {
                    (8, 16)
                } else {
                    (4, 7)
                };
                for i in from..to.min(b.len()) {
                    b[i] = rng.next() as u8;
                }
                b
            }
            3 => {
                let other = rng.pick(&self.gribs);
                let cut = rng.usize(base.len());
                [&base[..cut], &other[rng.usize(other.len())..]].concat()
            }
            4 => mutate(&base, rng),
            _ => {
                let mut b = base.clone();
                if b.len() > 16 {
                    b[7] = rng.next() as u8; // the edition
                }
                b
            }
        };
        let file = self.store.path("random.grib");
        std::fs::write(&file, &bytes).unwrap();
        self.store.run(
            self.tally,
            context,
            config,
            &["write", file.to_str().unwrap()],
        );
        Some(file)
    }
}

fn random_request(rng: &mut Rng) -> String {
    match rng.below(12) {
        0 => String::new(),
        1 => {
            let unit = rng.pick(VALUES).to_string();
            // Under the kernel's limit of 128 KiB for one argument.
            format!(
                "param={}",
                unit.repeat(1 + rng.usize(100_000 / unit.len().max(1)))
            )
        }
        2 => {
            let n = rng.usize(300);
            String::from_utf8_lossy(&rng.bytes(n)).replace('\0', "")
        }
        _ => {
            let mut s = rng.pick(VERBS).to_string();
            let n = rng.usize(9);
            for i in 0..n {
                if i > 0 {
                    s.push(if rng.chance(95) { ',' } else { ';' });
                }
                let k: &&str = rng.pick(KEYS);
                s.push_str(k);
                if rng.chance(95) {
                    s.push('=');
                }
                let values = 1 + rng.usize(3);
                for j in 0..values {
                    if j > 0 {
                        s.push('/');
                    }
                    let v: &&str = rng.pick(VALUES);
                    s.push_str(v);
                }
            }
            s
        }
    }
}

/// Bytes flipped, cut, zeroed, duplicated or spliced: what a broken file looks like.
fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.usize(4) {
        let n = b.len().max(1);
        match rng.below(5) {
            0 if !b.is_empty() => {
                let at = rng.usize(n);
                b[at] ^= 1 << rng.below(8);
            }
            1 => b.truncate(rng.usize(n)),
            2 if !b.is_empty() => {
                let at = rng.usize(n);
                let len = rng.usize(64).min(b.len() - at);
                b[at..at + len].fill(0);
            }
            3 => {
                let at = rng.usize(n).min(b.len());
                let piece = b[at..]
                    .iter()
                    .take(rng.usize(64))
                    .copied()
                    .collect::<Vec<_>>();
                b.splice(at..at, piece);
            }
            _ => {
                let at = rng.usize(n).min(b.len());
                let n = rng.usize(16);
                b.splice(at..at, rng.bytes(n));
            }
        }
    }
    b
}

/// Long arguments shortened for messages (the whole one is kept in a file).
fn cut(s: &str) -> String {
    if s.len() <= 300 {
        return s.to_string();
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}
