//! FDB5's own stores read in place: the example stores of `shared/testdata/
//! fdb5-format-examples.tar.gz` (written by FDB5 5.10.8 and 5.25) listed as FDB5 listed them, byte
//! for byte; live stores written here by Debian's FDB5 5.10.8 (its nested `dbnames` layout, and
//! the flat one with sub-tocs, re-archived keys, a writer that died before compacting its
//! sub-toc, purge, hide, locks, wipe, a move) listed and read beside FDB5's own tools; a
//! read-only copy read by another user; damaged tocs and indexes refused with the file and the
//! offset named, never a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
#[allow(dead_code)] // not every helper is used here
#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{have_fdb5, run};

/// The request every listing here is of.
const REQ: &str = "class=od,expver=0001";

/// The example stores of the tarball.
const STORES: [&str; 10] = ["A", "B", "C", "D", "P510", "P525", "H", "64", "O", "S"];

/// The ECMWF schema the live stores use.
fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

/// What a test cannot run without: in CI (`CI=true`) a failure, else a SKIP line.
fn missing(test: &str, what: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {what} not found, and CI=true");
    }
    skip::skip(test, what, false);
}

/// The example tarball: `shared/testdata` beside the repository (and beside CI's clone).
fn tarball(test: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/fdb5-format-examples.tar.gz");
    if p.exists() {
        Some(p)
    } else {
        missing(test, &p.display().to_string());
        None
    }
}

/// The tarball unpacked into `dir`, its absolute `/tmp/fdbfmt` paths made `dir/fdbfmt` in the
/// configs and the expected outputs. The stores themselves are left as FDB5 wrote them (rootC's
/// masked sub-toc record keeps its `/tmp/fdbfmt` path), but for rootO's overlay record, which
/// names another database's toc by absolute path: it is pointed at the copy here (see
/// `a_moved_overlay_fails_cleanly_or_follows_its_root`).
fn extract(tarball: &Path, dir: &Path) -> PathBuf {
    run(Command::new("tar")
        .arg("-xzf")
        .arg(tarball)
        .arg("-C")
        .arg(dir));
    let top = dir.join("fdbfmt");
    let here = top.display().to_string();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&top)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.extend(
        std::fs::read_dir(top.join("expected"))
            .unwrap()
            .map(|e| e.unwrap().path()),
    );
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, text.replace("/tmp/fdbfmt", &here)).unwrap();
    }
    let overlay = top.join("rootO/od:0001:oper:20240101:1200:g/toc");
    assert_eq!(repoint(&overlay, "/tmp/fdbfmt", &here), 1);
    top
}

/// Rewrites the path of every TOC_SUB_TOC and TOC_CLEAR record of the toc `toc` that starts
/// with `from` to start with `to` instead (the record keeps its size; its padding is zeroed).
/// Returns how many records changed.
fn repoint(toc: &Path, from: &str, to: &str) -> usize {
    let mut b = std::fs::read(toc).unwrap();
    let (mut pos, mut changed) = (0, 0);
    while pos + 112 <= b.len() {
        let size = u64::from_le_bytes(b[pos + 104..pos + 112].try_into().unwrap()) as usize;
        let p = pos + 112;
        if matches!(b[pos], b's' | b'c') && b[p] == 15 {
            let len = u32::from_be_bytes(b[p + 1..p + 5].try_into().unwrap()) as usize;
            let path = String::from_utf8(b[p + 5..p + 5 + len].to_vec()).unwrap();
            if let Some(rest) = path.strip_prefix(from) {
                let new = format!("{to}{rest}");
                // The path, then the offset (a Stream long: tag and 4 bytes).
                let offset = b[p + 5 + len..p + 10 + len].to_vec();
                let mut payload = vec![15];
                payload.extend((new.len() as u32).to_be_bytes());
                payload.extend(new.as_bytes());
                payload.extend(offset);
                assert!(payload.len() <= size - 112, "{new} does not fit the record");
                b[p..pos + size].fill(0);
                b[p..p + payload.len()].copy_from_slice(&payload);
                changed += 1;
            }
        }
        pos += size;
    }
    std::fs::write(toc, b).unwrap();
    changed
}

/// The environment a command (FDB5's or ours) runs in: the config, FDB_HOME (or none, so that
/// Debian's `/etc/fdb/dbnames` applies), the dbnames file; nothing else a shell may hold.
#[derive(Clone)]
struct Env {
    config: PathBuf,
    home: Option<PathBuf>,
    dbnames: Option<&'static str>,
}

impl Env {
    /// The flat layout (no dbnames file), `home` as FDB_HOME.
    fn flat(config: &Path, home: &Path) -> Env {
        std::fs::create_dir_all(home).unwrap();
        Env {
            config: config.to_path_buf(),
            home: Some(home.to_path_buf()),
            dbnames: Some("/nonexistent"),
        }
    }

    fn apply<'c>(&self, c: &'c mut Command) -> &'c mut Command {
        for v in fieldstore::model::config::ENV_STEPS {
            c.env_remove(v);
        }
        for v in [
            "FDB_DBNAMES_FILE",
            "FDB5_SUB_TOCS",
            "FDB_SUB_TOCS",
            "FIELDSTORE_LOG",
            "FIELDSTORE_TOKEN",
        ] {
            c.env_remove(v);
        }
        c.env("FDB5_CONFIG_FILE", &self.config);
        if let Some(h) = &self.home {
            c.env("FDB_HOME", h);
        }
        if let Some(d) = self.dbnames {
            c.env("FDB_DBNAMES_FILE", d);
        }
        c
    }

    /// One of Debian's FDB5 tools.
    fn fdb5(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        self.apply(&mut c);
        c
    }

    /// fieldstore called by an FDB5 tool's name.
    fn ours(&self, tool: &str) -> Command {
        let mut c = common::fieldstore();
        c.arg0(tool);
        self.apply(&mut c);
        c
    }

    /// fieldstore's own subcommands.
    fn fieldstore(&self) -> Command {
        let mut c = common::fieldstore();
        self.apply(&mut c);
        c
    }

    /// One of upstream FDB5 5.25's tools.
    fn fdb525(&self, t: &Fdb525, tool: &str) -> Command {
        let mut c = Command::new(t.bin.join(tool));
        self.apply(&mut c);
        c.env("FDB_CONFIG_FILE", &self.config)
            .env("LD_LIBRARY_PATH", &t.libs);
        c
    }
}

/// Upstream FDB5 5.25's tools (PyPI `fdb5lib`) from the reference virtualenv scripts/python-test
/// makes (`target/py-venv-ref`, or the one `FIELDSTORE_REF_PYTHON` runs from).
struct Fdb525 {
    bin: PathBuf,
    libs: String,
}

fn fdb525() -> Option<Fdb525> {
    let venv = match std::env::var_os("FIELDSTORE_REF_PYTHON") {
        Some(py) => PathBuf::from(py).parent()?.parent()?.to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-venv-ref"),
    };
    let site = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("fdb5lib/bin/fdb-list").exists())?;
    let mut libs = vec![site.join("fdb5lib/lib64")];
    for e in std::fs::read_dir(&site).ok()?.filter_map(|e| e.ok()) {
        let (p, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if name.ends_with(".libs") {
            libs.push(p);
        } else if name.ends_with("lib") && name != "fdb5lib" && p.join("lib64").is_dir() {
            libs.push(p.join("lib64"));
        }
    }
    let libs = libs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    Some(Fdb525 {
        bin: site.join("fdb5lib/bin"),
        libs,
    })
}

/// Says once per test that the 5.25 comparisons are skipped.
fn fdb525_or_skip(test: &str) -> Option<Fdb525> {
    let t = fdb525();
    if t.is_none() {
        skip::skip(
            &format!("{test} (its FDB5 5.25 comparisons)"),
            "upstream FDB5 5.25 (PyPI fdb5lib in target/py-venv-ref, made by scripts/python-test)",
            // Required where scripts/test runs this again after scripts/python-test.
            std::env::var_os("FIELDSTORE_NEED_FDB5LIB").is_some(),
        );
    }
    t
}

fn stdout_of(what: &str, o: &Output) -> String {
    common::succeeded(what, o)
}

/// `--porcelain --location` listing arguments, with `--full` or without.
fn listing(full: bool) -> Vec<&'static str> {
    let mut a = vec!["--porcelain", "--location"];
    if full {
        a.push("--full");
    }
    a.push(REQ);
    a
}

/// One listed field: its key text and where FDB5 says its bytes are.
struct Located {
    key: String,
    path: PathBuf,
    offset: usize,
    length: usize,
}

fn between<'a>(s: &'a str, a: &str, b: &str) -> &'a str {
    let i = s.find(a).unwrap_or_else(|| panic!("no '{a}' in {s}")) + a.len();
    let j = s[i..].find(b).unwrap_or_else(|| panic!("no '{b}' in {s}")) + i;
    &s[i..j]
}

fn located(line: &str) -> Located {
    let (key, loc) = line
        .split_once(" TocFieldLocation[")
        .unwrap_or_else(|| panic!("not a location line: {line}"));
    Located {
        key: key.to_string(),
        path: PathBuf::from(between(loc, "name=", "],offset=")),
        offset: between(loc, "],offset=", ",length=").parse().unwrap(),
        length: between(loc, ",length=", ",remapKey=").parse().unwrap(),
    }
}

/// `{a=1,b=2}{c=3}{d=4}` as a retrieve of that one field.
fn request_of(key: &str) -> String {
    format!(
        "retrieve,{}",
        key.trim_start_matches('{')
            .trim_end_matches('}')
            .replace("}{", ",")
    )
}

/// The values of each keyword of listed keys.
fn axes_of(keys: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut axes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for k in keys {
        let inner = k.trim_start_matches('{').trim_end_matches('}');
        for pair in inner.split("}{").flat_map(|l| l.split(',')) {
            let (kw, v) = pair.split_once('=').unwrap();
            axes.entry(kw.into()).or_default().insert(v.into());
        }
    }
    axes
}

/// The bytes the listed locations name, one after the other.
fn located_bytes(lines: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        let loc = located(l);
        let data = std::fs::read(&loc.path)
            .unwrap_or_else(|e| panic!("{}: {e} (listed as {l})", loc.path.display()));
        out.extend_from_slice(&data[loc.offset..loc.offset + loc.length]);
    }
    out
}

/// The messages of GRIB files.
fn messages(paths: &[PathBuf]) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for p in paths {
        for m in fieldstore::grib::MessageReader::new(std::fs::File::open(p).unwrap(), "t") {
            out.insert(m.unwrap().bytes);
        }
    }
    out
}

/// The GRIB messages of `bytes`.
fn split_messages(bytes: &[u8]) -> Vec<Vec<u8>> {
    if bytes.is_empty() {
        return Vec::new();
    }
    fieldstore::grib::MessageReader::new(bytes, "read")
        .map(|m| m.unwrap().bytes)
        .collect()
}

/// `fieldstore read` of every listed field (one request each, in listing order) gives the bytes
/// the listing locates; and `fieldstore axes` gives the listed keys' values.
fn ours_read_and_axes_agree(env: &Env, what: &str, lines: &[String], work: &Path) -> Vec<u8> {
    ours_read_and_axes_agree_with(env, what, lines, lines, work)
}

/// As `ours_read_and_axes_agree`, with axes giving the values of `axes_lines`' keys (FDB5's axes
/// ignore list locks, so they also give those of a database the listing leaves out).
fn ours_read_and_axes_agree_with(
    env: &Env,
    what: &str,
    lines: &[String],
    axes_lines: &[String],
    work: &Path,
) -> Vec<u8> {
    let keys: Vec<String> = lines.iter().map(|l| located(l).key).collect();
    let axes_keys: Vec<String> = axes_lines.iter().map(|l| located(l).key).collect();
    let axes = env
        .fieldstore()
        .args(["axes", "--json", REQ])
        .output()
        .unwrap();
    let got: BTreeMap<String, BTreeSet<String>> =
        serde_json::from_str(&stdout_of(&format!("{what}: axes"), &axes)).unwrap();
    assert_eq!(
        got,
        axes_of(&axes_keys),
        "{what}: `fieldstore axes` (left), the listed keys' values (right)"
    );
    if lines.is_empty() {
        return Vec::new();
    }
    let req = work.join("fields.req");
    let text: String = keys.iter().map(|k| request_of(k) + "\n").collect();
    std::fs::write(&req, text).unwrap();
    let out = work.join("fields.grib");
    let o = env
        .fieldstore()
        .arg("read")
        .arg(&req)
        .arg(&out)
        .output()
        .unwrap();
    stdout_of(&format!("{what}: read"), &o);
    let read = std::fs::read(&out).unwrap();
    assert!(
        read == located_bytes(lines),
        "{what}: `fieldstore read` of the listed fields is not the bytes the listing locates"
    );
    read
}

/// What FDB5 (5.10.8, or 5.25 where 5.10.8 cannot read the store) listed for store `name` of the
/// tarball, in 5.10.8's form.
fn expected_listing(top: &Path, name: &str, full: bool) -> String {
    let which = if full { "full-location" } else { "location" };
    let version = if matches!(name, "64" | "S") {
        "5.25"
    } else {
        "5.10.8"
    };
    let p = top.join(format!(
        "expected/root{name}.fdb-list-{which}.{version}.txt"
    ));
    std::fs::read_to_string(&p)
        .unwrap()
        .replace("}, TocFieldLocation", "} TocFieldLocation")
}

#[test]
fn example_stores_list_read_and_axes_as_fdb5() {
    let test = "example_stores_list_read_and_axes_as_fdb5";
    let Some(tarball) = tarball(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let top = extract(&tarball, d.path());
    let inputs = messages(
        &["run1", "run2", "run3", "run3_x2"].map(|n| top.join(format!("inputs/{n}.grib"))),
    );
    let upstream = fdb525_or_skip(test);
    let mut fields = 0;
    for name in STORES {
        let what = format!("root{name}");
        let env = Env::flat(
            &top.join(format!("config{name}.yaml")),
            &d.path().join("home"),
        );
        let mut visible = Vec::new();
        for full in [false, true] {
            let o = env.ours("fdb-list").args(listing(full)).output().unwrap();
            let got = stdout_of(&format!("{what}: fdb-list"), &o);
            assert_eq!(
                got,
                expected_listing(&top, name, full),
                "{what}: fdb-list {:?}: ours (left), FDB5's (right)",
                listing(full)
            );
            if !full {
                visible = got.lines().map(str::to_string).collect::<Vec<_>>();
            }
        }
        let work = d.path().join(format!("work-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        let read = ours_read_and_axes_agree(&env, &what, &visible, &work);
        for m in split_messages(&read) {
            assert!(
                inputs.contains(&m),
                "{what}: a field read is none of the GRIB inputs"
            );
            fields += 1;
        }
        // fdb-axes as upstream prints it (5.10 has none), also of a store with nothing visible
        // (rootH), whose database's own values 5.25 names.
        if let Some(t) = &upstream {
            for args in [vec![REQ], vec!["--json", REQ], vec!["--level=1", REQ]] {
                let theirs = run(env.fdb525(t, "fdb-axes").args(&args));
                let ours = run(env.ours("fdb-axes").args(&args));
                assert_eq!(ours, theirs, "{what}: fdb-axes {args:?}: ours, 5.25's");
            }
        }
    }
    // Visible fields: A, B, P510, P525 five each; C, D, 64, O, S three each; H none.
    assert_eq!(fields, 4 * 5 + 5 * 3);
}

/// GRIB inputs of the live stores: `name` in `dir`, made by `fieldstore sample`.
fn sample(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut c = common::fieldstore();
    c.args(["sample", "--out"]).arg(&out).args(extra);
    if !extra.contains(&"--points") {
        c.args(["--points", "50"]);
    }
    run(&mut c);
    out
}

/// A root and the config naming it, in `dir`.
fn live_config(dir: &Path, root: &Path) -> PathBuf {
    std::fs::create_dir_all(root).unwrap();
    let config = dir.join(format!(
        "config-{}.yaml",
        root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema().display(),
            root.display()
        ),
    )
    .unwrap();
    config
}

/// Database keys of the live stores.
const D22: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g";
const D23: &str = "class=od,expver=0001,stream=oper,date=20261123,time=1200,domain=g";
const D24: &str = "class=od,expver=0001,stream=oper,date=20261124,time=1200,domain=g";

/// The side-by-side checks of one moment of a live store: FDB5's `fdb-list --porcelain
/// --location` and `--full` and ours, byte for byte; `fdb-read` of every listed field (one
/// request each, up to 100 fields) and of `ranges` (requests with lists and absent combinations), by FDB5, by
/// `fieldstore read` and by our `fdb-read`, the same bytes. Returns FDB5's lines without and
/// with `--full`.
fn side_by_side(
    env: &Env,
    stage: &str,
    work: &Path,
    ranges: &[String],
) -> (Vec<String>, Vec<String>) {
    side_by_side_axes(env, stage, work, ranges, None)
}

/// As `side_by_side`; `axes_lines` are the fields whose values `fieldstore axes` must give when
/// they are not the visible ones (a list lock hides a database from listings, not from axes).
fn side_by_side_axes(
    env: &Env,
    stage: &str,
    work: &Path,
    ranges: &[String],
    axes_lines: Option<&[String]>,
) -> (Vec<String>, Vec<String>) {
    let mut listed = Vec::new();
    for full in [false, true] {
        let theirs = run(env.fdb5("fdb-list").args(listing(full)));
        let ours = run(env.ours("fdb-list").args(listing(full)));
        assert_eq!(
            ours,
            theirs,
            "{stage}: fdb-list {:?}: ours (left), FDB5 5.10.8's (right)",
            listing(full)
        );
        listed.push(theirs.lines().map(str::to_string).collect::<Vec<_>>());
    }
    let full = listed.pop().unwrap();
    let visible = listed.pop().unwrap();
    // One request per field (FDB5 takes a while over a file of a thousand requests: a big
    // store is read through `ranges`).
    let per_field: String = if visible.len() <= 100 {
        visible
            .iter()
            .map(|l| request_of(&located(l).key) + "\n")
            .collect()
    } else {
        String::new()
    };
    let ranges: String = ranges.iter().map(|r| format!("{r}\n")).collect();
    let slug: String = stage
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .collect();
    for (kind, text) in [("fields", per_field), ("ranges", ranges)] {
        if text.is_empty() {
            continue;
        }
        let req = work.join(format!("{slug}-{kind}.req"));
        std::fs::write(&req, &text).unwrap();
        let out = |who: &str| work.join(format!("{slug}-{kind}-{who}.grib"));
        run(env.fdb5("fdb-read").arg(&req).arg(out("fdb5")));
        run(env.fieldstore().arg("read").arg(&req).arg(out("ours")));
        run(env.ours("fdb-read").arg(&req).arg(out("ours-fdb-read")));
        let theirs = std::fs::read(out("fdb5")).unwrap();
        assert!(!theirs.is_empty(), "{stage}: FDB5 read nothing of\n{text}");
        for who in ["ours", "ours-fdb-read"] {
            assert!(
                std::fs::read(out(who)).unwrap() == theirs,
                "{stage}: {who} read other bytes than FDB5's fdb-read of\n{text}"
            );
        }
        if kind == "fields" {
            assert!(
                theirs == located_bytes(&visible),
                "{stage}: FDB5 read other bytes than the listing locates"
            );
        }
        // A request matching nothing among them: FDB5's fdb-read reads the rest (exit 0), and
        // so does ours under that name.
        let none = work.join(format!("{slug}-{kind}-none.req"));
        std::fs::write(
            &none,
            format!("{text}retrieve,class=od,expver=0001,stream=oper,date=20300101,time=1200,domain=g,type=fc,levtype=sfc,step=0,param=167\n"),
        )
        .unwrap();
        run(env.fdb5("fdb-read").arg(&none).arg(out("none-fdb5")));
        run(env.ours("fdb-read").arg(&none).arg(out("none-ours")));
        assert!(
            std::fs::read(out("none-ours")).unwrap() == std::fs::read(out("none-fdb5")).unwrap(),
            "{stage}: with a request matching nothing, our fdb-read read other bytes than FDB5's"
        );
    }
    let axes_work = work.join(&slug);
    std::fs::create_dir_all(&axes_work).unwrap();
    ours_read_and_axes_agree_with(
        env,
        stage,
        &visible,
        axes_lines.unwrap_or(&visible),
        &axes_work,
    );
    (visible, full)
}

/// Upstream 5.25's `fdb-axes` (Debian's 5.10.8 has none) and ours, text and JSON, byte for byte:
/// also where FDB5's axes are odd (an index counts whole when its own keys match, so `step=0`
/// still shows every step; the empty value of an optional keyword some fields lack,
/// `levelist=(,1000,500)` where surface and pressure-level fields meet).
fn same_axes_as_525(env: &Env, t: &Fdb525, stage: &str) {
    let narrowed = [
        format!("{REQ},levtype=sfc,step=0"),
        format!("{REQ},levelist=500"),
        format!("{REQ},param=999"),
    ];
    let mut requests = vec![REQ.to_string()];
    requests.extend(narrowed);
    for req in &requests {
        for flags in [vec![], vec!["--json"], vec!["--level=1"], vec!["--level=2"]] {
            let mut args: Vec<&str> = flags.clone();
            args.push(req);
            let theirs = run(env.fdb525(t, "fdb-axes").args(&args));
            let ours = run(env.ours("fdb-axes").args(&args));
            assert_eq!(ours, theirs, "{stage}: fdb-axes {args:?}: ours, 5.25's");
        }
    }
}

/// Archives GRIB files through Debian's libfdb5 (the C API, from Python's ctypes), flushing
/// after each, then exits without closing: a writer killed before it compacts its sub-tocs,
/// which stay visible, named by absolute paths.
const DIE_AFTER_FLUSH: &str = r#"
import ctypes, os, sys
lib = ctypes.CDLL("libfdb5.so.0d")
assert lib.fdb_initialise() == 0
h = ctypes.c_void_p()
assert lib.fdb_new_handle(ctypes.byref(h)) == 0
for fn in sys.argv[1:]:
    data = open(fn, "rb").read()
    assert lib.fdb_archive_multiple(h, None, ctypes.c_char_p(data), ctypes.c_size_t(len(data))) == 0
    assert lib.fdb_flush(h) == 0
os._exit(0)
"#;

fn can_die_after_flush() -> bool {
    Command::new("python3")
        .args(["-c", "import ctypes; ctypes.CDLL('libfdb5.so.0d')"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes `files` as a killed writer would (see DIE_AFTER_FLUSH), with sub-tocs.
fn die_after_flush(env: &Env, files: &[&Path]) {
    run(env
        .fdb5("python3")
        .env("FDB5_SUB_TOCS", "1")
        .args(["-c", DIE_AFTER_FLUSH])
        .args(files));
}

/// Nested directories (Debian's `/etc/fdb/dbnames`: `od:0001/20261122:1200:g/oper`): FDB5 5.10.8
/// writes and lists them recursively; ours lists and reads the same, and follows FDB5's purge
/// and wipe there.
#[test]
fn debians_nested_layout_side_by_side() {
    let test = "debians_nested_layout_side_by_side";
    if !have_fdb5() {
        return skip::skip(test, "FDB5's tools", true);
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let root = p("root");
    // No FDB_HOME and no FDB_DBNAMES_FILE: both read Debian's /etc/fdb/dbnames.
    let env = Env {
        config: live_config(d.path(), &root),
        home: None,
        dbnames: None,
    };
    let a = sample(
        d.path(),
        "a.grib",
        &["--params", "t/u", "--levels", "1000/500", "--steps", "0/6"],
    );
    let c = sample(
        d.path(),
        "c.grib",
        &[
            "--date", "20261123", "--params", "t", "--levels", "1000", "--steps", "0",
        ],
    );
    let a2 = sample(
        d.path(),
        "a2.grib",
        &[
            "--points", "60", "--params", "t", "--levels", "500", "--steps", "6",
        ],
    );
    run(env.fdb5("fdb-write").arg(&a).arg(&c));
    run(env.fdb5("fdb-write").arg(&a2));
    let nested = Path::new("/etc/fdb/dbnames").exists();
    let db_dir = |date: &str| {
        if nested {
            root.join(format!("od:0001/{date}:1200:g/oper"))
        } else {
            root.join(format!("od:0001:oper:{date}:1200:g"))
        }
    };
    if nested {
        assert!(
            db_dir("20261122").join("toc").exists(),
            "Debian's dbnames did not nest the databases"
        );
    } else {
        skip::skip(test, "Debian's /etc/fdb/dbnames (the layout is flat)", true);
    }
    let ranges = [format!(
        "retrieve,{REQ},stream=oper,date=20261122/20261123,time=1200,domain=g,type=fc,levtype=pl,step=0/6,levelist=1000/850/500,param=130/131"
    )];
    let (visible, full) = side_by_side(&env, "nested, written", d.path(), &ranges);
    assert_eq!((visible.len(), full.len()), (9, 10));

    run(env.fdb5("fdb-purge").args(["--doit", D22]));
    let (_, full) = side_by_side(&env, "nested, purged", d.path(), &ranges);
    assert_eq!(full.len(), 10, "nothing was wholly masked");

    let where_ = |c: &mut Command| run(c.arg(REQ));
    assert_eq!(
        where_(&mut env.ours("fdb-where")),
        where_(&mut env.fdb5("fdb-where"))
    );
    run(env.fdb5("fdb-wipe").args(["--doit", D23]));
    assert!(!db_dir("20261123").exists() && db_dir("20261122").exists());
    let ranges = [format!(
        "retrieve,{REQ},stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0/6,levelist=1000/500,param=130"
    )];
    let (visible, _) = side_by_side(&env, "nested, one database wiped", d.path(), &ranges);
    assert!(visible.iter().all(|l| l.contains("date=20261122")));
    assert_eq!(visible.len(), 8);
    assert_eq!(
        where_(&mut env.ours("fdb-where")),
        where_(&mut env.fdb5("fdb-where"))
    );
}

/// The flat layout, written with sub-tocs through several runs (one of them killed before it
/// compacted its sub-tocs), with re-archived keys; then FDB5's purge, hide, list and retrieve
/// locks, wipe; then the root moved elsewhere. At each step FDB5's tools and ours list and read
/// the same.
#[test]
fn flat_layout_with_sub_tocs_purge_hide_lock_wipe_side_by_side() {
    let test = "flat_layout_with_sub_tocs_purge_hide_lock_wipe_side_by_side";
    if !have_fdb5() {
        return skip::skip(test, "FDB5's tools", true);
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let root = p("root");
    let env = Env::flat(&live_config(d.path(), &root), &p("home"));
    let pl = ["--params", "t/u", "--levels", "1000/500", "--steps", "0/6"];
    let a = sample(d.path(), "a.grib", &pl);
    let sfc = ["--levtype", "sfc", "--params", "2t/msl", "--steps", "0"];
    let b = sample(d.path(), "b.grib", &sfc);
    let c = sample(
        d.path(),
        "c.grib",
        &[
            "--date", "20261123", "--params", "t", "--levels", "1000", "--steps", "0",
        ],
    );
    // Re-archived keys: one pressure-level field, then both surface fields (so that the first
    // surface index is wholly masked and purge clears it).
    let a2 = sample(
        d.path(),
        "a2.grib",
        &[
            "--points", "60", "--params", "t", "--levels", "500", "--steps", "6",
        ],
    );
    let b2 = sample(
        d.path(),
        "b2.grib",
        &[&sfc[..], &["--points", "80"]].concat(),
    );
    let e = sample(
        d.path(),
        "e.grib",
        &[
            "--date", "20261124", "--params", "t/u", "--levels", "850", "--steps", "0",
        ],
    );
    let write = |files: &[&Path]| {
        run(env.fdb5("fdb-write").env("FDB5_SUB_TOCS", "1").args(files));
    };
    write(&[&a]);
    write(&[&b]);
    let died = can_die_after_flush();
    if died {
        die_after_flush(&env, &[&c, &a2]);
    } else {
        skip::skip(
            &format!("{test} (a writer dying before it compacts)"),
            "python3 with Debian's libfdb5.so.0d",
            true,
        );
        write(&[&c, &a2]);
    }
    write(&[&b2]);
    write(&[&e]);
    let db22 = root.join("od:0001:oper:20261122:1200:g");
    if died {
        let toc = std::fs::read(db22.join("toc")).unwrap();
        let needle = format!("{}/toc.", db22.display());
        assert!(
            toc.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "5.10.8 names its sub-tocs by absolute path"
        );
    }

    let pl_all = "type=fc,levtype=pl,step=0/6,levelist=1000/850/500,param=130/131,time=1200,domain=g,stream=oper";
    let sfc_all = "type=fc,levtype=sfc,step=0,param=167/151,time=1200,domain=g,stream=oper";
    let ranges = |dates: &str| {
        vec![
            format!("retrieve,{REQ},date={dates},{pl_all}"),
            format!("retrieve,{REQ},date=20261122,{sfc_all}"),
        ]
    };
    let upstream = fdb525_or_skip(test);
    let (visible, full) = side_by_side(
        &env,
        "written",
        d.path(),
        &ranges("20261122/20261123/20261124"),
    );
    // 8 + 2 + 1 + 2 fields; 3 of them archived again.
    assert_eq!((visible.len(), full.len()), (13, 16));
    if let Some(t) = &upstream {
        same_axes_as_525(&env, t, "written");
    }

    run(env.fdb5("fdb-purge").args(["--doit", D22]));
    let (visible, full) = side_by_side(
        &env,
        "purged",
        d.path(),
        &ranges("20261122/20261123/20261124"),
    );
    assert_eq!(
        (visible.len(), full.len()),
        (13, 14),
        "purge clears the wholly masked surface index"
    );
    if let Some(t) = &upstream {
        same_axes_as_525(&env, t, "purged");
    }

    run(env.fdb5("fdb-hide").args(["--doit", D23]));
    let (hidden, _) = side_by_side(&env, "hidden", d.path(), &ranges("20261122/20261124"));
    assert_eq!(hidden.len(), 12);
    assert!(!hidden.iter().any(|l| l.contains("date=20261123")));

    // A list lock: FDB5 leaves the database out of listings (not of axes), and so does ours;
    // retrieving from it still works.
    run(env.fdb5("fdb-lock").args(["--list", D22]));
    let (locked, _) = side_by_side_axes(&env, "list-locked", d.path(), &[], Some(&hidden));
    assert_eq!(locked.len(), 2, "only the 20261124 database lists");
    assert!(locked.iter().all(|l| l.contains("date=20261124")));
    let o = env.fieldstore().args(["list", D22]).output().unwrap();
    assert!(
        stdout_of("list of a list-locked database", &o).is_empty(),
        "ours lists a list-locked database"
    );
    let req = p("hidden.req");
    let text: String = hidden
        .iter()
        .map(|l| request_of(&located(l).key) + "\n")
        .collect();
    std::fs::write(&req, text).unwrap();
    run(env.fieldstore().arg("read").arg(&req).arg(p("locked.grib")));
    assert!(std::fs::read(p("locked.grib")).unwrap() == located_bytes(&hidden));
    run(env.fdb5("fdb-unlock").args(["--list", D22]));
    let (unlocked, _) = side_by_side(&env, "list-unlocked", d.path(), &[]);
    assert_eq!(unlocked, hidden);

    // A retrieve lock: FDB5's fdb-read skips the database and reads the rest, and so does ours
    // under that name; `fieldstore read` refuses the whole read, naming the lock.
    run(env.fdb5("fdb-lock").args(["--retrieve", D22]));
    run(env.fdb5("fdb-read").arg(&req).arg(p("rlocked-fdb5.grib")));
    let d24: Vec<String> = hidden
        .iter()
        .filter(|l| l.contains("date=20261124"))
        .cloned()
        .collect();
    assert!(std::fs::read(p("rlocked-fdb5.grib")).unwrap() == located_bytes(&d24));
    let o = env
        .fieldstore()
        .arg("read")
        .arg(&req)
        .arg(p("rlocked-ours.grib"))
        .output()
        .unwrap();
    let err = common::failed("read from a retrieve-locked database", &o);
    assert!(err.contains("locked") && !err.contains("panicked"), "{err}");
    let o = env
        .ours("fdb-read")
        .arg(&req)
        .arg(p("rlocked-fdb-read.grib"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(") is LOCKED for retrieval"),
        "our fdb-read says: {err}"
    );
    assert!(std::fs::read(p("rlocked-fdb-read.grib")).unwrap() == located_bytes(&d24));
    run(env.fdb5("fdb-unlock").args(["--retrieve", D22]));

    // FDB5 wipes a database whose writers all closed; ours sees it gone.
    run(env.fdb5("fdb-wipe").args(["--doit", D24]));
    assert!(!root.join("od:0001:oper:20261124:1200:g").exists());
    let (left, _) = side_by_side(&env, "wiped", d.path(), &ranges("20261122"));
    assert_eq!(left.len(), 10);
    assert!(left.iter().all(|l| l.contains("date=20261122")));
    let where_ = |c: &mut Command| run(c.arg(REQ));
    assert_eq!(
        where_(&mut env.ours("fdb-where")),
        where_(&mut env.fdb5("fdb-where"))
    );

    // The root moved: the sub-toc records name the old place. FDB5 5.10.8 follows the absolute
    // path and fails; ours finds the sub-toc beside the toc.
    let (_, full_before) = side_by_side(&env, "before the move", d.path(), &[]);
    let moved = p("moved");
    std::fs::rename(&root, &moved).unwrap();
    let env = Env::flat(&live_config(d.path(), &moved), &p("home"));
    let shift = |lines: &[String]| -> String {
        lines
            .iter()
            .map(|l| {
                l.replace(
                    &format!("{}/", root.display()),
                    &format!("{}/", moved.display()),
                ) + "\n"
            })
            .collect()
    };
    for (full, before) in [(false, &left), (true, &full_before)] {
        let ours = run(env.ours("fdb-list").args(listing(full)));
        assert_eq!(ours, shift(before), "moved: fdb-list {:?}", listing(full));
    }
    let moved_lines: Vec<String> = shift(&left).lines().map(str::to_string).collect();
    ours_read_and_axes_agree(&env, "moved", &moved_lines, d.path());
    if died {
        let o = env.fdb5("fdb-list").args(listing(false)).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("No such file or directory"),
            "FDB5 5.10.8 read a moved store whose sub-tocs it names by absolute path: {err}"
        );
    }
}

/// FDB5 5.10.8's purge of an index that lives in a sub-toc still visible (its writer died before
/// compacting): it appends the TOC_CLEAR to the main toc and deletes the index file, but 5.10.8
/// applies no main-toc mask to sub-toc records, so its own list then fails on the missing file
/// (FDB5-FORMAT.md §3.6, §7). Ours applies the mask as 5.25 does: it lists what 5.25 lists.
#[test]
fn fdb5_5_10_purge_of_a_sub_toc_index_breaks_its_own_list_not_ours() {
    let test = "fdb5_5_10_purge_of_a_sub_toc_index_breaks_its_own_list_not_ours";
    if !have_fdb5() {
        return skip::skip(test, "FDB5's tools", true);
    }
    if !can_die_after_flush() {
        return skip::skip(test, "python3 with Debian's libfdb5.so.0d", true);
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let env = Env::flat(&live_config(d.path(), &root), &d.path().join("home"));
    let a = sample(
        d.path(),
        "a.grib",
        &["--params", "t/u", "--levels", "1000/500", "--steps", "0/6"],
    );
    let one = ["--params", "t", "--levels", "500", "--steps", "6"];
    let a2 = sample(
        d.path(),
        "a2.grib",
        &[&one[..], &["--points", "60"]].concat(),
    );
    let a4 = sample(
        d.path(),
        "a4.grib",
        &[&one[..], &["--points", "90"]].concat(),
    );
    run(env.fdb5("fdb-write").env("FDB5_SUB_TOCS", "1").arg(&a));
    die_after_flush(&env, &[&a2]);
    run(env.fdb5("fdb-write").env("FDB5_SUB_TOCS", "1").arg(&a4));
    let (before, _) = side_by_side(&env, "before the purge", d.path(), &[]);
    run(env.fdb5("fdb-purge").args(["--doit", D22]));

    let o = env.fdb5("fdb-list").args(listing(false)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("Failed to open"),
        "FDB5 5.10.8 now lists its own purged store: {err}"
    );
    let upstream = fdb525_or_skip(test);
    for full in [false, true] {
        let ours = run(env.ours("fdb-list").args(listing(full)));
        if !full {
            assert_eq!(
                ours.lines().collect::<Vec<_>>(),
                before,
                "purge changed what is visible"
            );
        }
        assert_eq!(ours.lines().count(), if full { 9 } else { 8 });
        if let Some(t) = &upstream {
            let theirs = run(env.fdb525(t, "fdb-list").args(listing(full)))
                .replace("}, TocFieldLocation", "} TocFieldLocation");
            assert_eq!(ours, theirs, "fdb-list {:?}: ours, 5.25's", listing(full));
        }
    }
    ours_read_and_axes_agree(&env, "purged", &before, d.path());
}

/// A copy of rootO moved elsewhere, its overlay record naming the old place, which is gone:
/// ours either follows the root (the sibling database, as the record named it) or fails naming
/// the toc, never a panic.
#[test]
fn a_moved_overlay_fails_cleanly_or_follows_its_root() {
    let test = "a_moved_overlay_fails_cleanly_or_follows_its_root";
    let Some(tarball) = tarball(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let first = d.path().join("first");
    std::fs::create_dir_all(&first).unwrap();
    let top = extract(&tarball, &first);
    let elsewhere = d.path().join("elsewhere");
    std::fs::rename(&top, &elsewhere).unwrap();
    let from = top.display().to_string();
    let to = elsewhere.display().to_string();
    let config = elsewhere.join("configO.yaml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&from, &to);
    std::fs::write(&config, text).unwrap();
    let env = Env::flat(&config, &d.path().join("home"));
    let o = env.ours("fdb-list").args(listing(false)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    if o.status.success() {
        let expected =
            std::fs::read_to_string(elsewhere.join("expected/rootO.fdb-list-location.5.10.8.txt"))
                .unwrap()
                .replace(&from, &to);
        assert_eq!(String::from_utf8_lossy(&o.stdout), expected);
    } else {
        let toc = elsewhere.join("rootO/od:0001:oper:20240101:1200:g/toc");
        assert!(
            err.contains(&toc.display().to_string()) && err.contains("offset 1024"),
            "{err}"
        );
    }
}

/// Restores write permission under a directory made read-only (so that it can be removed).
struct Writable(PathBuf);

impl Drop for Writable {
    fn drop(&mut self) {
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("u+w")
            .arg(&self.0)
            .status();
    }
}

/// The example stores made read-only (`chmod -R a-w`) still list and read, as another user
/// when the test runs as root (uid 65534, through `setpriv`), as the test's user otherwise.
#[test]
fn a_read_only_root_lists_and_reads() {
    let test = "a_read_only_root_lists_and_reads";
    let Some(tarball) = tarball(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let top = extract(&tarball, d.path());
    let bin = d.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_fieldstore"));
    std::os::unix::fs::symlink(exe, bin.join("fdb-list")).unwrap();
    let out = d.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    run(Command::new("chmod").arg("a+rwx").arg(&out));
    run(Command::new("chmod").arg("a+rx").arg(d.path()));
    run(Command::new("chmod").arg("-R").arg("a-w").arg(&top));
    let _restore = Writable(top.clone());

    let root = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1)
        == 0;
    let mut nobody = root;
    if root {
        let probe = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(exe)
            .arg("--version")
            .output();
        if !probe.is_ok_and(|o| o.status.success()) {
            skip::skip(
                &format!("{test} (as another user)"),
                "setpriv, or a fieldstore binary uid 65534 may run",
                false,
            );
            nobody = false;
        }
    } else {
        skip::skip(
            &format!("{test} (as another user)"),
            "root, to run as uid 65534 (the test's own user reads the read-only copy)",
            false,
        );
    }
    let command = |program: &Path| -> Command {
        let mut c = if nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(program);
            c
        } else {
            Command::new(program)
        };
        c.current_dir("/").env("HOME", "/nonexistent");
        c
    };
    for name in STORES {
        let what = format!("read-only root{name}");
        let env = Env::flat(&top.join(format!("config{name}.yaml")), &out.join("home"));
        for full in [false, true] {
            let mut c = command(&bin.join("fdb-list"));
            env.apply(&mut c).args(listing(full));
            let got = stdout_of(&format!("{what}: fdb-list"), &c.output().unwrap());
            assert_eq!(got, expected_listing(&top, name, full), "{what}");
            if full || got.is_empty() {
                continue;
            }
            let lines: Vec<String> = got.lines().map(str::to_string).collect();
            let req = out.join(format!("{name}.req"));
            let text: String = lines
                .iter()
                .map(|l| request_of(&located(l).key) + "\n")
                .collect();
            std::fs::write(&req, text).unwrap();
            let grib = out.join(format!("{name}.grib"));
            let mut c = command(exe);
            env.apply(&mut c).arg("read").arg(&req).arg(&grib);
            stdout_of(&format!("{what}: read"), &c.output().unwrap());
            assert!(
                std::fs::read(&grib).unwrap() == located_bytes(&lines),
                "{what}: read"
            );
        }
    }
}

/// A change made to one file of a copied store.
enum Damage {
    Truncate(usize),
    U32Le(usize, u32),
    U32Be(usize, u32),
    U64Le(usize, u64),
    Byte(usize, u8),
}

fn damage(path: &Path, d: &Damage) {
    let mut b = std::fs::read(path).unwrap();
    match *d {
        Damage::Truncate(n) => b.truncate(n),
        Damage::U32Le(at, v) => b[at..at + 4].copy_from_slice(&v.to_le_bytes()),
        Damage::U32Be(at, v) => b[at..at + 4].copy_from_slice(&v.to_be_bytes()),
        Damage::U64Le(at, v) => b[at..at + 8].copy_from_slice(&v.to_le_bytes()),
        Damage::Byte(at, v) => b[at] = v,
    }
    std::fs::write(path, b).unwrap();
}

/// `fieldstore list`, `read` and `axes` of a damaged store: the list fails naming the file and
/// the offset (and `detail`); nothing panics.
fn refused(env: &Env, what: &str, file: &Path, offset: u64, detail: &str, read: &str) {
    let o = env.fieldstore().args(["list", REQ]).output().unwrap();
    let err = common::failed(&format!("{what}: list"), &o);
    let named = format!("{} is corrupt at offset {offset}: ", file.display());
    assert!(
        err.contains(&named) && err.contains(detail),
        "{what}: expected '{named}...{detail}' in:\n{err}"
    );
    for args in [vec!["read", read, "/dev/null"], vec!["axes", REQ]] {
        let o = env.fieldstore().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{what}: {args:?}: {err}");
        assert!(
            o.status.code().is_some(),
            "{what}: {args:?} died of a signal"
        );
    }
}

#[test]
fn damaged_tocs_and_indexes_are_refused_naming_the_file_and_offset() {
    let test = "damaged_tocs_and_indexes_are_refused_naming_the_file_and_offset";
    let Some(tarball) = tarball(test) else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let top = extract(&tarball, d.path());
    let db = "rootA/od:0001:oper:20240101:1200:g";
    // The newer of rootA's two indexes (the third toc record, at 2048, names it).
    let index = "fc:pl.20261127.051931.vm.115186727911424.index";
    let read = "retrieve,class=od,expver=0001,stream=oper,date=20240101,time=1200,domain=g,type=fc,levtype=pl,step=0/6,levelist=500/850,param=130/131";
    // (name, file, damage, offset named, detail)
    let cases: Vec<(&str, &str, Damage, u64, &str)> = vec![
        (
            "toc cut inside its first record",
            "toc",
            Damage::Truncate(600),
            0,
            "ends inside its first record",
        ),
        (
            "bad serialisation version",
            "toc",
            Damage::U32Le(1024 + 4, 7),
            1024,
            "version 7",
        ),
        (
            "record size not a multiple of 1024",
            "toc",
            Damage::U64Le(1024 + 104, 1000),
            1024,
            "record size 1000",
        ),
        (
            "record size past any payload",
            "toc",
            Damage::U64Le(2048 + 104, 1 << 40),
            2048,
            "record size",
        ),
        // The index path's length, right after its string tag at 1024 + 112.
        (
            "string length past the payload",
            "toc",
            Damage::U32Be(1024 + 113, 0x7fff_ffff),
            1137,
            "runs past the payload",
        ),
        (
            "page id mismatch",
            index,
            Damage::U64Le(0, 2),
            0,
            "page 1 says it is page 2",
        ),
        (
            "count past the page",
            index,
            Damage::U64Le(8, 5000),
            0,
            "claims 5000 entries",
        ),
        (
            "uri id missing",
            index,
            Damage::U64Le(40 + 32, 7),
            0,
            "data file id 7",
        ),
        (
            "index file cut short",
            index,
            Damage::Truncate(100),
            0,
            "past the end of the file",
        ),
        (
            "a leaf marked as a node",
            index,
            Damage::Byte(16, 1),
            0,
            "page id 0",
        ),
    ];
    for (what, file, dmg, offset, detail) in cases {
        let copy = d.path().join("copy");
        let _ = std::fs::remove_dir_all(&copy);
        run(Command::new("cp")
            .arg("-a")
            .arg(top.join("rootA"))
            .arg(&copy));
        let config = d.path().join("config.yaml");
        std::fs::write(
            &config,
            std::fs::read_to_string(top.join("configA.yaml"))
                .unwrap()
                .replace(
                    &top.join("rootA").display().to_string(),
                    &copy.display().to_string(),
                ),
        )
        .unwrap();
        let path = copy
            .join(Path::new(db).strip_prefix("rootA").unwrap())
            .join(file);
        damage(&path, &dmg);
        let env = Env::flat(&config, &d.path().join("home"));
        refused(&env, what, &path, offset, detail, read);
    }

    // A toc cut inside a later record (a writer that died inside its one write()): the whole
    // records before it are read, the torn one is not. FDB5 5.10.8 fails on such a toc
    // ("Assertion failed: size_t(len) == r.header_.size_ - sizeof(TocRecord::Header)").
    for cut in [2500, 2048 + 50] {
        let copy = d.path().join("torn");
        let _ = std::fs::remove_dir_all(&copy);
        run(Command::new("cp")
            .arg("-a")
            .arg(top.join("rootA"))
            .arg(&copy));
        let config = d.path().join("torn.yaml");
        std::fs::write(
            &config,
            std::fs::read_to_string(top.join("configA.yaml"))
                .unwrap()
                .replace(
                    &top.join("rootA").display().to_string(),
                    &copy.display().to_string(),
                ),
        )
        .unwrap();
        damage(
            &copy.join("od:0001:oper:20240101:1200:g/toc"),
            &Damage::Truncate(cut),
        );
        let env = Env::flat(&config, &d.path().join("home"));
        let o = env.ours("fdb-list").args(listing(false)).output().unwrap();
        let got = stdout_of(&format!("toc torn at {cut}"), &o);
        // What is left is the first run's index: its three fields.
        assert_eq!(got.lines().count(), 3, "{got}");
        assert!(
            got.lines().all(|l| l.contains("114959094644738.data")),
            "{got}"
        );
    }
}

/// A B-tree of several pages (1300 fields: a node page over two leaves, as FDB5 5.10.8 writes
/// it), listed as FDB5 lists it; damaged in its second and third pages, refused naming the
/// pages' offsets.
#[test]
fn a_multi_page_btree_lists_and_its_damaged_pages_are_named() {
    let test = "a_multi_page_btree_lists_and_its_damaged_pages_are_named";
    if !have_fdb5() {
        return skip::skip(test, "FDB5's tools", true);
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let env = Env::flat(&live_config(d.path(), &root), &d.path().join("home"));
    let steps: Vec<String> = (0..130).map(|s| s.to_string()).collect();
    let big = sample(
        d.path(),
        "big.grib",
        &[
            "--points",
            "20",
            "--params",
            "t",
            "--levels",
            "1000/925/850/700/600/500/400/300/250/200",
            "--steps",
            &steps.join("/"),
        ],
    );
    run(env.fdb5("fdb-write").arg(&big));
    let all = [format!(
        "retrieve,{D22},type=fc,levtype=pl,step={},levelist=1000/925/850/700/600/500/400/300/250/200,param=130",
        steps.join("/")
    )];
    let (visible, _) = side_by_side(&env, "1300 fields", d.path(), &all);
    assert_eq!(visible.len(), 1300);
    let db = root.join("od:0001:oper:20261122:1200:g");
    let index = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "index"))
        .unwrap();
    let bytes = std::fs::read(&index).unwrap();
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    // Page 1: a node over pages 2 and 3 (leaves), then the trailing empty tree.
    assert_eq!(bytes.len(), 4 * 65536);
    assert_eq!((u64_at(0), u64_at(16), u64_at(24)), (1, 1, 2));
    let pristine = d.path().join("pristine.index");
    std::fs::copy(&index, &pristine).unwrap();
    let read = format!("retrieve,{D22},type=fc,levtype=pl,step=0/129,levelist=1000/200,param=130");
    for (what, dmg, offset, detail) in [
        (
            "second page's id",
            Damage::U64Le(65536, 9),
            65536,
            "page 2 says it is page 9",
        ),
        (
            "third page's count",
            Damage::U64Le(2 * 65536 + 8, 5000),
            2 * 65536,
            "page 3 claims 5000 entries",
        ),
        (
            "leaf links looping",
            Damage::U64Le(65536 + 32, 2),
            0,
            "loop",
        ),
        (
            "root's left child past the file",
            Damage::U64Le(24, 99),
            98 * 65536,
            "page 99",
        ),
    ] {
        std::fs::copy(&pristine, &index).unwrap();
        damage(&index, &dmg);
        refused(&env, what, &index, offset, detail, &read);
    }
}

/// fdb-list with several requests lists a key the first time a request names it, and never
/// again for a later one; a single request keeps no record of what it listed (regression: the
/// fdb-list name kept every line of a million-field listing in a set).
#[test]
fn fdb_list_with_overlapping_requests_lists_each_key_once_as_fdb5() {
    let test = "fdb_list_with_overlapping_requests_lists_each_key_once_as_fdb5";
    if !have_fdb5() {
        return skip::skip(test, "FDB5's tools", true);
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let env = Env::flat(&live_config(d.path(), &root), &d.path().join("home"));
    let a = sample(
        d.path(),
        "a.grib",
        &["--params", "t/u", "--levels", "1000/500", "--steps", "0/6"],
    );
    run(env.fdb5("fdb-write").arg(&a));
    let requests = [
        format!("{D22},type=fc,levtype=pl,param=130"),
        format!("{D22},type=fc,levtype=pl,step=0"),
        format!("{D22},type=fc,levtype=pl"),
    ];
    for args in [vec!["--porcelain"], vec!["--porcelain", "--full"], vec![]] {
        let theirs = run(env.fdb5("fdb-list").args(&args).args(&requests));
        let ours = run(env.ours("fdb-list").args(&args).args(&requests));
        assert_eq!(
            ours, theirs,
            "fdb-list {args:?}: ours (left), FDB5's (right)"
        );
        if args == ["--porcelain"] {
            assert_eq!(theirs.lines().count(), 8, "{theirs}");
        }
    }
}
