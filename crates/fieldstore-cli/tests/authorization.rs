//! Authorization with real `fieldstore server` processes and real `fieldstore` clients, one
//! remote config per identity (docs/authorization.md): every forbidden operation is refused,
//! named, logged and counted, and changes nothing; every allowed one works; databases remember
//! their creator across server restarts.

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output};

use server::Served;

const IDENTITIES: [(&str, &str); 6] = [
    ("w1", "w1-token-55555"),
    ("consumer", "consumer-token"),
    ("alice", "alice-token-1"),
    ("bob", "bob-token-22"),
    ("ops", "ops-token-333"),
    ("od1", "od1-token-4444"),
];

/// sha256("consumer-token"): the consumer's token is stored hashed, as operators should.
fn tokens_file() -> String {
    let digest = fieldstore::remote::auth::token_sha256("consumer-token");
    format!(
        "identities:
  - name: consumer
    token_sha256: {digest}
    role: reader
  - name: alice
    token: alice-token-1
    role: writer
  - name: bob
    token: bob-token-22
    role: writer
  - name: ops
    token: ops-token-333
    role: operator
  - name: od1
    token: od1-token-4444
    allow:
      - operations: [list, retrieve]
        databases: class=od,expver=0001
  - name: w1
    token: w1-token-55555
    allow:
      - operations: [archive, list]
        databases: [\"class=od,expver=0001\"]
"
    )
}

const DB1: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
const DB2: &str = "class=od,expver=0002,stream=oper,date=20261122,time=1200";

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("tokens.yaml"), tokens_file()).unwrap();
        Site { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, config: &str, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path(config)).args(args);
        c
    }

    /// A server with the tokens file, and one remote config per identity (`alice.yaml`...).
    fn serve(&self) -> Served {
        let tokens = self.path("tokens.yaml");
        let args = [
            "server",
            "--listen",
            "127.0.0.1:0",
            "--tokens",
            tokens.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ];
        let served = server::start(self.command("local.yaml", &args), self.dir.path(), "unused");
        for (name, token) in IDENTITIES {
            std::fs::write(
                self.path(&format!("{name}.yaml")),
                format!(
                    "type: remote\nhost: 127.0.0.1\nport: {}\ntoken: {token}\n",
                    served.port
                ),
            )
            .unwrap();
        }
        served
    }

    fn run(&self, who: &str, args: &[&str]) -> Output {
        self.command(&format!("{who}.yaml"), args).output().unwrap()
    }

    fn ok(&self, who: &str, args: &[&str]) -> String {
        common::succeeded(&format!("{who} {args:?}"), &self.run(who, args))
    }

    /// Runs a command that must be refused; returns its error output.
    fn refused(&self, who: &str, args: &[&str]) -> String {
        let err = common::failed(&format!("{who} {args:?}"), &self.run(who, args));
        assert!(
            err.contains(&format!("identity '{who}' may not")),
            "{who} {args:?}: {err}"
        );
        err
    }

    /// Fields of the given expvers, as an operator lists them, with the state of each database
    /// (locks, journal records): what a refused operation must leave as it was.
    fn state(&self) -> String {
        let list = self.ok("ops", &["list", "class=od", "--porcelain", "--full"]);
        let status = self.ok("ops", &["control", "status", "class=od"]);
        let stats = self.ok("ops", &["stats", "class=od"]);
        format!("{list}\n{status}\n{stats}")
    }

    /// Sample fields of one expver, archived by `who`.
    fn write(&self, who: &str, expver: &str) {
        let p = self.path(&format!("{who}-{expver}.grib"));
        let out = p.to_str().unwrap();
        let o = self
            .command(
                "local.yaml",
                &[
                    "sample", "--out", out, "--steps", "0/6", "--params", "t", "--levels", "500",
                    "--points", "50", "--expver", expver,
                ],
            )
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        self.ok(who, &["write", out]);
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }
}

fn metrics(served: &Served) -> String {
    let mut s = TcpStream::connect(served.metrics.as_deref().unwrap()).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn refusals(served: &Served, who: &str, op: &str) -> u64 {
    let want = format!("fieldstore_refused_total{{identity=\"{who}\",operation=\"{op}\"}} ");
    metrics(served)
        .lines()
        .find_map(|l| l.strip_prefix(&want).map(|n| n.parse().unwrap()))
        .unwrap_or(0)
}

#[test]
fn only_the_creator_or_an_operator_changes_a_database_and_refusals_change_nothing() {
    let site = Site::new();
    let mut served = site.serve();
    site.write("alice", "0001");
    site.write("bob", "0002");

    // Each database names its creator, to the operator and in a local dump of the store.
    let dump = site.ok("ops", &["dump", DB1]);
    assert!(dump.contains("created by 'alice'"), "{dump}");
    let stats = site.ok("ops", &["stats", DB2]);
    assert!(stats.contains("created by 'bob'"), "{stats}");
    let local = site.command("local.yaml", &["dump", DB1]).output().unwrap();
    assert!(String::from_utf8_lossy(&local.stdout).contains("created by 'alice'"));

    let before = site.state();
    assert_eq!(before.matches("expver=0001").count(), 2, "{before}");

    // A reader cannot archive: the batch is discarded, nothing appears.
    let grib = site.path("alice-0001.grib");
    let e = site.refused("consumer", &["write", grib.to_str().unwrap()]);
    assert!(e.contains("may not archive"), "{e}");

    // A writer cannot wipe, purge, compact or lock another writer's database; nor can a reader.
    for (who, args) in [
        ("bob", vec!["wipe", DB1, "--doit"]),
        ("bob", vec!["purge", DB1, "--doit"]),
        ("bob", vec!["compact", DB1]),
        ("bob", vec!["control", "lock", DB1, "--retrieve"]),
        // Spanning its own database and another's: refused before either is touched.
        ("bob", vec!["wipe", "class=od", "--doit"]),
        ("consumer", vec!["wipe", DB2, "--doit"]),
        ("alice", vec!["wipe", DB2, "--doit"]),
    ] {
        let e = site.refused(who, &args);
        assert!(
            e.contains("only its creator or an operator may")
                || e.contains("grants do not cover it"),
            "{e}"
        );
    }
    let e = site.refused("bob", &["wipe", DB1, "--doit"]);
    assert!(
        e.contains(&format!("identity 'bob' may not wipe {DB1},domain=g: created by 'alice'; only its creator or an operator may")),
        "{e}"
    );
    let e = site.refused("consumer", &["wipe", DB2, "--doit"]);
    assert!(e.contains("its grants do not cover it"), "{e}");
    assert_eq!(site.state(), before, "refused operations changed nothing");
    assert_eq!(
        refusals(&served, "bob", "wipe"),
        5,
        "wipe, purge, compact, the span and again"
    );
    assert_eq!(refusals(&served, "bob", "control"), 1);
    assert_eq!(refusals(&served, "consumer", "archive"), 1);
    let log = site.log();
    assert!(
        log.contains("identity=bob") && log.contains("op=wipe") && log.contains("refused:"),
        "{log}"
    );

    // Its creator survives a server restart: still bob's, still not alice's to wipe.
    drop(served);
    served = site.serve();
    site.refused("alice", &["wipe", DB2, "--doit"]);
    assert_eq!(site.state(), before);
    assert_eq!(refusals(&served, "alice", "wipe"), 1);

    // Allowed: bob locks and wipes his own; the operator wipes alice's.
    site.ok("bob", &["control", "lock", DB2, "--wipe"]);
    site.ok("bob", &["control", "unlock", DB2, "--wipe"]);
    site.ok("bob", &["compact", DB2]);
    site.ok("bob", &["wipe", DB2, "--doit"]);
    site.ok("ops", &["wipe", DB1, "--doit"]);
    let after = site.ok("ops", &["list", "class=od", "--porcelain"]);
    assert!(after.trim().is_empty(), "{after}");
    drop(served);
}

#[test]
fn reads_return_only_what_the_grants_cover() {
    let site = Site::new();
    let served = site.serve();
    site.write("alice", "0001");
    site.write("alice", "0002");

    // od1 may list and retrieve class=od,expver=0001 only.
    let listed = site.ok("od1", &["list", "class=od", "--porcelain"]);
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(!listed.contains("expver=0002"), "{listed}");
    let stats = site.ok("od1", &["stats", "class=od"]);
    assert!(stats.contains("0001") && !stats.contains("0002"), "{stats}");
    let axes = site.ok("od1", &["axes", "class=od", "--json"]);
    assert!(axes.contains("0001") && !axes.contains("0002"), "{axes}");

    let out = site.path("od1.grib");
    let all = "class=od,expver=0001/0002,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,param=t,levelist=500,step=0/6";
    site.ok("od1", &["read", all, out.to_str().unwrap()]);
    let got = std::fs::read(&out).unwrap();
    let want = std::fs::read(site.path("alice-0001.grib")).unwrap();
    assert_eq!(got.len(), want.len(), "only the expver=0001 fields");

    // A subscription from the beginning announces only the covered fields.
    let watched = site.ok(
        "od1",
        &[
            "watch",
            "class=od",
            "--from",
            "beginning",
            "--timeout",
            "1s",
        ],
    );
    assert_eq!(watched.lines().count(), 2, "{watched}");
    assert!(!watched.contains("0002"), "{watched}");

    // Entirely outside the grants: refused, and counted.
    let e = site.refused("od1", &["list", "class=od,expver=0002", "--porcelain"]);
    assert!(
        e.contains("its grants cover none of the databases it names"),
        "{e}"
    );
    let only2 = all.replace("0001/0002", "0002");
    site.refused("od1", &["read", &only2, out.to_str().unwrap()]);
    // Neither archive nor wipe is in its grants.
    let grib = site.path("alice-0001.grib");
    site.refused("od1", &["write", grib.to_str().unwrap()]);
    site.refused("od1", &["wipe", DB1, "--doit"]);

    // An archive grant on one pattern: fields inside it are stored, a batch reaching outside
    // it is refused whole.
    site.write("w1", "0001");
    let e = site.refused(
        "w1",
        &["write", site.path("alice-0002.grib").to_str().unwrap()],
    );
    assert!(
        e.contains("may not archive") && e.contains("expver=0002"),
        "{e}"
    );
    let mut mixed = std::fs::read(site.path("w1-0001.grib")).unwrap();
    mixed.extend(std::fs::read(site.path("alice-0002.grib")).unwrap());
    std::fs::write(site.path("mixed.grib"), mixed).unwrap();
    let before = site.ok("consumer", &["list", "class=od", "--porcelain", "--full"]);
    site.refused("w1", &["write", site.path("mixed.grib").to_str().unwrap()]);
    let after = site.ok("consumer", &["list", "class=od", "--porcelain", "--full"]);
    assert_eq!(before, after, "nothing of a refused batch is visible");
    // A field large enough to be streamed to the store as it arrives is checked all the same.
    let big = site.path("big-0002.grib");
    let o = site
        .command(
            "local.yaml",
            &[
                "sample",
                "--out",
                big.to_str().unwrap(),
                "--steps",
                "12",
                "--params",
                "t",
                "--levels",
                "500",
                "--points",
                "800000",
                "--expver",
                "0002",
            ],
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&big).unwrap().len() > 1 << 20);
    let e = site.refused("w1", &["write", big.to_str().unwrap()]);
    assert!(e.contains("may not archive"), "{e}");
    assert_eq!(
        before,
        site.ok("consumer", &["list", "class=od", "--porcelain", "--full"])
    );
    assert_eq!(refusals(&served, "w1", "archive"), 3);
    assert_eq!(refusals(&served, "od1", "list"), 1);
    assert_eq!(refusals(&served, "od1", "retrieve"), 1);

    // The reader reads everything; a token not in the file is refused at the handshake.
    let all_read = site.ok("consumer", &["list", "class=od", "--porcelain"]);
    assert_eq!(all_read.lines().count(), 4, "{all_read}");
    std::fs::write(
        site.path("carol.yaml"),
        format!(
            "type: remote\nhost: 127.0.0.1\nport: {}\ntoken: carol-token-5\n",
            served.port
        ),
    )
    .unwrap();
    let o = site.run("carol", &["list", "class=od"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not one of this server's identities"));

    // SIGHUP re-reads the file: carol is known from then on.
    let mut tokens = tokens_file();
    tokens.push_str("  - name: carol\n    token: carol-token-5\n    role: reader\n");
    std::fs::write(site.path("tokens.yaml"), tokens).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &served.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !site.log().contains("tokens file re-read") {
        assert!(std::time::Instant::now() < deadline, "{}", site.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let carol = site.ok("carol", &["list", "class=od", "--porcelain"]);
    assert_eq!(carol.lines().count(), 4);
}

#[test]
fn a_bad_tokens_file_stops_the_server_at_startup_naming_the_line() {
    let site = Site::new();
    std::fs::write(
        site.path("tokens.yaml"),
        "identities:\n  - name: a\n    token: aaaaaaaa1\n    role: reader\n  - name: a\n    token: bbbbbbbb2\n    role: writer\n",
    )
    .unwrap();
    let tokens = site.path("tokens.yaml");
    let o = site
        .command(
            "local.yaml",
            &[
                "server",
                "--listen",
                "127.0.0.1:0",
                "--tokens",
                tokens.to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tokens.yaml line 5: identity 'a' is named twice"),
        "{err}"
    );
}
