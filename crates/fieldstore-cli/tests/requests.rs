//! Requests as users write them, through the real binary, locally and through a real
//! `fieldstore server`: requests naming millions of keys (issue 12), absurd ranges, and the order
//! `axes` and error hints show values in.

mod common;
#[path = "common/server.rs"]
mod server;

use server::Served;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret-token";
const ENS: &str = "retrieve,class=od,expver=0001,stream=enfo,date=20261122,time=1200,type=pf,levtype=pl,param=t/u";
/// Issue 12's request: 251 steps x 50 members x 1000 levels x 2 params, 25 million keys.
const HUGE: &str = "step=0/to/3000,number=1/to/50,levelist=1/to/1000";
/// Address space for the processes under test (KiB): a request naming millions of keys must
/// be answered within it, and without it the old behaviour would take the machine's memory.
const MEMORY_KIB: u64 = 2 << 20;

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    /// A store holding t/u on levels 1000/500, steps 0/6/12/24, the deterministic forecast and
    /// `members` perturbed members.
    fn with_sample(members: u32) -> Store {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
        )
        .unwrap();
        let s = Store { dir };
        let grib = s.path("sample.grib");
        let members = members.to_string();
        s.ok(
            "local.yaml",
            &[
                "sample",
                "--out",
                grib.to_str().unwrap(),
                "--steps",
                "0/6/12/24",
                "--params",
                "t/u",
                "--levels",
                "1000/500",
                "--members",
                &members,
                "--points",
                "10",
            ],
        );
        s.ok("local.yaml", &["write", grib.to_str().unwrap()]);
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `fieldstore --config <config> args...` in a shell that limits its address space first.
    fn command(&self, config: &str, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        let bin = c.get_program().to_owned();
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("ulimit -v {MEMORY_KIB} && exec \"$0\" \"$@\""))
            .arg(bin)
            .arg("--config")
            .arg(self.path(config))
            .args(args);
        // Keep the clean environment `common::fieldstore` gives.
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => sh.env(k, v),
                None => sh.env_remove(k),
            };
        }
        c = sh;
        c
    }

    fn run(&self, config: &str, args: &[&str]) -> Output {
        self.command(config, args).output().unwrap()
    }

    fn ok(&self, config: &str, args: &[&str]) -> String {
        let o = self.run(config, args);
        assert!(
            o.status.success(),
            "{config} {args:?}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn fails(&self, config: &str, args: &[&str]) -> String {
        let o = self.run(config, args);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{config} {args:?} should fail cleanly"
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    fn read(&self, config: &str, request: &str, out: &str) -> Vec<u8> {
        let path = self.path(out);
        self.ok(config, &["read", request, path.to_str().unwrap()]);
        std::fs::read(path).unwrap()
    }

    /// A server for `local.yaml` on a free port, under the same memory limit, and `remote.yaml`.
    fn serve(&self) -> Served {
        let c = self.command(
            "local.yaml",
            &["server", "--listen", "127.0.0.1:0", "--token", TOKEN],
        );
        server::start(c, self.dir.path(), TOKEN)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }
}

fn messages(bytes: &[u8]) -> usize {
    bytes.windows(4).filter(|w| w == b"GRIB").count()
}

/// Issue 12: the request naming 25 million keys used to build them all and abort. It reads the
/// fields that exist, quickly, in the order a request naming just them gives.
#[test]
fn a_request_naming_millions_of_keys_reads_what_exists() {
    let s = Store::with_sample(2);
    let started = Instant::now();
    let huge = s.read("local.yaml", &format!("{ENS},{HUGE}"), "huge.grib");
    let took = started.elapsed();
    // Steps 0/12/24 (6 is not in 0/to/3000, by 12) x 2 members x 2 levels x 2 params.
    assert_eq!(messages(&huge), 24);
    let small = s.read(
        "local.yaml",
        &format!("{ENS},step=0/12/24,number=1/2,levelist=500/1000"),
        "small.grib",
    );
    assert_eq!(huge, small);
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // `list` and `axes` expand the same request.
    let list = s.ok(
        "local.yaml",
        &["list", &format!("{ENS},{HUGE}"), "--porcelain"],
    );
    assert_eq!(list.lines().count(), 24, "{list}");
}

/// Through `type: remote` the same request used to kill the server; it answers it, and the next.
#[test]
fn the_server_answers_a_request_naming_millions_of_keys_and_lives_on() {
    let s = Store::with_sample(2);
    let mut server = s.serve();
    let huge = s.read("remote.yaml", &format!("{ENS},{HUGE}"), "huge.grib");
    assert_eq!(messages(&huge), 24);
    assert!(server.is_running(), "server died: {}", s.log());
    // An absurd range is refused with a clear error; the server stays up.
    let e = s.fails(
        "remote.yaml",
        &[
            "read",
            &format!("{ENS},step=0/to/999999999,number=1,levelist=500"),
            s.path("x.grib").to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("'step': range 0/to/999999999 names 83333334 values"),
        "{e}"
    );
    assert!(server.is_running(), "server died: {}", s.log());
    let one = s.read(
        "remote.yaml",
        &format!("{ENS},step=12,number=2,levelist=500"),
        "one.grib",
    );
    assert_eq!(messages(&one), 2);
    assert!(server.is_running(), "server died: {}", s.log());
}

/// A range naming more values than a request may is refused, naming the keyword and the count,
/// by `read` and by `request expand`.
#[test]
fn absurd_ranges_are_refused_with_their_count() {
    let s = Store::with_sample(0);
    let e = s.fails(
        "local.yaml",
        &[
            "read",
            "class=od,expver=1,stream=oper,date=20261122,time=12,type=fc,levtype=pl,param=t,levelist=500,step=0/to/999999999",
            s.path("x.grib").to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("'step': range 0/to/999999999 names 83333334 values, more than the 1000000"),
        "{e}"
    );
    let e = s.fails(
        "local.yaml",
        &[
            "request",
            "expand",
            "number=1/to/600000,levelist=1/to/600000",
        ],
    );
    assert!(
        e.contains("'levelist': range 1/to/600000 names 600000 values"),
        "{e}"
    );
    // The expansion of a large (allowed) request says how many keys it names without making them
    // (twice 25.1 million: the database key may or may not have its optional domain=g).
    let out = s.ok(
        "local.yaml",
        &["request", "expand", "--schema", &format!("{ENS},{HUGE}")],
    );
    assert!(out.contains("(names 50200000 keys)"), "{out}");
}

/// `axes` sorts values by their type, in text and JSON: numbers numerically, not as text.
#[test]
fn axes_sort_values_by_type() {
    let s = Store::with_sample(10);
    let out = s.ok("local.yaml", &["axes", "class=od,expver=0001"]);
    let line = |kw: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{kw}: ")))
            .unwrap_or_else(|| panic!("no {kw} in {out}"))
            .to_string()
    };
    assert_eq!(line("number"), "number: 1/2/3/4/5/6/7/8/9/10");
    assert_eq!(line("step"), "step: 0/6/12/24");
    assert_eq!(line("levelist"), "levelist: 500/1000");
    assert_eq!(line("param"), "param: 130/131");
    assert_eq!(line("stream"), "stream: enfo/oper");
    let json = s.ok("local.yaml", &["axes", "class=od,expver=0001", "--json"]);
    assert!(
        json.contains(r#""number":["1","2","3","4","5","6","7","8","9","10"]"#),
        "{json}"
    );
    assert!(json.contains(r#""step":["0","6","12","24"]"#), "{json}");
    // The hint of a read that finds nothing lists what exists in the same order.
    let e = s.fails(
        "local.yaml",
        &[
            "read",
            &format!("{ENS},step=36,number=1,levelist=500"),
            s.path("x.grib").to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("step=36 matched nothing; present: 0/6/12/24"),
        "{e}"
    );
}

/// Regression: a read that failed left an empty (or cut-short) output file behind, and a
/// request leaving out keywords was told only that "no field has this combination".
#[test]
fn a_failed_read_leaves_no_file_and_names_the_keywords_left_out() {
    let s = Store::with_sample(10);
    let out = s.path("partial.grib");
    let e = s.fails(
        "local.yaml",
        &[
            "read",
            "retrieve,class=od,expver=0001,stream=enfo,date=20261122,type=pf,levtype=pl,param=t,step=0,number=1,levelist=500",
            out.to_str().unwrap(),
        ],
    );
    assert!(e.contains("names no value for"), "{e}");
    assert!(e.contains("time"), "{e}");
    assert!(!out.exists(), "a failed read left {} behind", out.display());
    // Into a device, nothing is removed.
    s.fails(
        "local.yaml",
        &[
            "read",
            &format!("{ENS},step=36,number=1,levelist=500"),
            "/dev/null",
        ],
    );
    assert!(std::path::Path::new("/dev/null").exists());
}
