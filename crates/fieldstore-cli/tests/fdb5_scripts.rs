//! FDB5's tools and the `fdb-*` names side by side: the same invocations, once on Debian's FDB5
//! 5.10.8 tools and once on scripts/install-fdb-tools' names, each on its own store holding the
//! same GRIB; what they print must be the same byte for byte once the store roots, the data and
//! index file names (each store names its own) and FDB5's timings are set aside.
//!
//! Two sources of invocations: a script of ours covering every output form, and FDB5's own tool
//! tests (upstream `tests/fdb/tools/list/list_*.sh.in`), run unchanged but for their CMake
//! placeholders, read from an upstream checkout (`FDB5_SOURCE`: a work tree or a bare git dir).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{configured, fdb5_listing, have_fdb5, run};

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

/// The ECMWF schema both stores use.
fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("-V").output().is_ok()
}

/// Installs the `fdb-*` names into `dir`.
fn install(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-fdb-tools");
    run(Command::new(script).arg("--bin").arg(FS).arg(dir));
}

fn sample(out: &Path, extra: &[&str]) {
    run(Command::new(FS)
        .args(["sample", "--out", out.to_str().unwrap(), "--points", "50"])
        .args(extra));
}

/// Runs `script` in bash in `cwd` with `bin` first on PATH and the store of `config`.
fn bash(script: &str, cwd: &Path, bin: &Path, config: &Path, home: &Path) -> Output {
    let mut c = Command::new("bash");
    configured(&mut c, config, home)
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env_remove("FIELDSTORE_LOG");
    c.output().unwrap()
}

/// What is compared: `root` as ROOT, each data or index file's name as FILE.data/FILE.index
/// (fieldstore's index files end in .idx), FDB5's timing lines of fdb-write left out.
fn normalised(out: &[u8], root: &Path) -> String {
    let text = String::from_utf8_lossy(out).replace(&root.display().to_string(), "ROOT");
    let mut lines = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with("FDB archive ") || line.starts_with("fdb::service::") {
            continue;
        }
        let mut l = line.to_string();
        for (ext, name) in [
            (".data", "FILE.data"),
            (".index", "FILE.index"),
            (".idx", "FILE.index"),
        ] {
            l = file_names(&l, ext, name);
        }
        lines.push(l);
    }
    lines.concat()
}

/// Replaces every path segment ending in `ext` (up to the `/` before it) by `name`.
fn file_names(line: &str, ext: &str, name: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find(ext) {
        let end = i + ext.len();
        let boundary = rest[end..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric());
        let start = rest[..i].rfind('/').map_or(0, |s| s + 1);
        if boundary && start < i {
            out.push_str(&rest[..start]);
            out.push_str(name);
        } else {
            out.push_str(&rest[..end]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A store at `dir/root` with the ECMWF schema; its config file.
fn store(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("root")).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema().display(),
            dir.join("root").display()
        ),
    )
    .unwrap();
    config
}

/// Every output form the `fdb-*` names take from FDB5, in the order a session would use them;
/// each command's output in its own section.
const FORMS: &str = r####"
set -u
db=class=od,expver=0001,stream=oper,date=20261122,time=1200
step() { echo "### $*"; "$@"; echo "### rc=$?"; }
step fdb-write in.grib
step fdb-list class=od,expver=0001
step fdb-list --all --minimum-keys=
step fdb-list --porcelain class=od,expver=0001
step fdb-list --location class=od,expver=0001
step fdb-list --porcelain --location class=od,expver=0001
step fdb-list --json class=od,expver=0001
echo
step fdb-list --json class=od,expver=0002
echo
step fdb-list class=od,expver=0001,stream=oper class=od,expver=0001,levelist=500
step fdb-list class=od,expver=0001,param=130/131,levelist=500,stream=oper,type=fc,levtype=pl,time=12
step fdb-list class=od,expver=0002
step fdb-where class=od,expver=0001
step fdb-where --all --minimum-keys=
step fdb-wipe $db
step fdb-wipe --porcelain $db
step fdb-wipe class=od,expver=0001,stream=oper,date=20261123,time=1200
step fdb-wipe --ignore-no-data class=od,expver=0001,stream=oper,date=20261123,time=1200
step fdb-info
step fdb-write in.grib d2.grib
step fdb-where class=od,expver=0001,date=20261123
# Sizes are each layout's own; the counts are compared.
step fdb-stats class=od,expver=0001,date=20261122 class=od,expver=0001,date=20261123 | grep -v 'Size of\|size'
step fdb-stats --details --all --minimum-keys= | grep -v 'Size of\|size'
step fdb-list --all --minimum-keys= --porcelain --full
step fdb-list --full class=od,expver=0001,date=20261122
step fdb-wipe $db class=od,expver=0001,stream=oper,date=20261123,time=1200
step fdb-purge --porcelain $db
step fdb-purge --porcelain --doit $db
step fdb-list --all --minimum-keys= --porcelain --full
step fdb-dump --all > /dev/null
step fdb-stats --all --minimum-keys= > /dev/null
"####;

#[test]
fn every_output_form_is_fdb5s() {
    if !have_fdb5() {
        return skip::skip("every_output_form_is_fdb5s", "FDB5's tools", true);
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let bin = p("bin");
    install(&bin);
    sample(
        &p("in.grib"),
        &["--params", "t/u", "--levels", "1000/500", "--steps", "0/6"],
    );
    sample(
        &p("d2.grib"),
        &[
            "--date", "20261123", "--params", "t", "--levels", "1000", "--steps", "0",
        ],
    );
    let mut outputs = Vec::new();
    for (side, tools) in [("fdb5", PathBuf::from("/usr/bin")), ("ours", bin.clone())] {
        let dir = p(side);
        let config = store(&dir);
        let o = bash(FORMS, d.path(), &tools, &config, &dir.join("home"));
        outputs.push(normalised(&o.stdout, &dir.join("root")));
        // FDB5 really wrote and purged (so that equal outputs are not two equal failures): 8
        // fields of one database, 1 of the other. Ours is compared with it below.
        if side == "fdb5" {
            assert_eq!(fdb5_listing(&config, &dir.join("home")).len(), 9);
        }
    }
    let (theirs, ours) = (&outputs[0], &outputs[1]);
    // Section by section, so a failure names the command.
    let sections = |s: &str| -> Vec<String> { s.split("### ").map(str::to_string).collect() };
    let (t, o) = (sections(theirs), sections(ours));
    assert_eq!(t.len(), o.len(), "FDB5:\n{theirs}\nfieldstore:\n{ours}");
    for (t, o) in t.iter().zip(&o) {
        assert_eq!(o, t, "FDB5's section (right) differs from ours (left)");
    }
    assert!(theirs.contains("Listing for request\nretrieve,\n\tclass=od,\n\texpver=0001\n\n\n{"));
}

/// Upstream's tool tests, from `FDB5_SOURCE` or the local mirror; `None` if neither is there.
fn upstream_script(path: &str) -> Option<String> {
    upstream_file(path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// A file of upstream's tree, from a work tree or a bare git directory; a symlink (which git
/// stores as its target) is followed.
fn upstream_file(path: &str) -> Option<Vec<u8>> {
    let roots: Vec<PathBuf> = std::env::var_os("FDB5_SOURCE")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/work/.mirror/ecmwf+fdb/repo")])
        .collect();
    for root in roots {
        if let Ok(bytes) = std::fs::read(root.join(path)) {
            return Some(bytes);
        }
        let Ok(o) = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["show", &format!("HEAD:{path}")])
            .output()
        else {
            continue;
        };
        if !o.status.success() {
            continue;
        }
        let link = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["ls-tree", "HEAD", path])
            .output()
            .ok()
            .is_some_and(|l| l.stdout.starts_with(b"120000"));
        if link {
            let target = String::from_utf8_lossy(&o.stdout).into_owned();
            let dir = Path::new(path).parent().unwrap_or(Path::new(""));
            let mut resolved = Vec::new();
            for part in dir.join(target).components() {
                match part {
                    std::path::Component::ParentDir => {
                        resolved.pop();
                    }
                    c => resolved.push(c.as_os_str().to_string_lossy().into_owned()),
                }
            }
            return upstream_file(&resolved.join("/"));
        }
        return Some(o.stdout);
    }
    None
}

/// FDB5's test data stand-in: 24 analysis fields of 2020-09-11 (two times, two parameters, six
/// levels), the shape upstream's `od.oper.grib` has and its list tests count on.
fn od_oper(d: &Path) -> PathBuf {
    let mut parts = Vec::new();
    for time in ["0000", "1200"] {
        let f = d.join(format!("t{time}.grib"));
        sample(
            &f,
            &[
                "--date",
                "20240911",
                "--time",
                time,
                "--params",
                "155/138",
                "--levels",
                "300/400/500/700/850/1000",
                "--steps",
                "0",
            ],
        );
        parts.push(std::fs::read(&f).unwrap());
    }
    let both = d.join("both.grib");
    std::fs::write(&both, parts.concat()).unwrap();
    let out = d.join("od.oper.grib");
    run(Command::new("grib_set")
        .args(["-s", "type=an"])
        .arg(&both)
        .arg(&out));
    out
}

#[test]
fn fdb5s_own_list_tests_pass_and_print_the_same() {
    if !have_fdb5() || !have("grib_set") {
        return skip::skip(
            "fdb5s_own_list_tests_pass_and_print_the_same",
            "FDB5's tools and ecCodes' grib_set",
            true,
        );
    }
    let names = ["list_all", "list_location", "list_minimum_keys"];
    let Some(local_yaml) = upstream_script("tests/fdb/tools/list/local.yaml") else {
        // An upstream checkout is no package: say so loudly, even in CI.
        return skip::skip(
            "fdb5s_own_list_tests_pass_and_print_the_same",
            "FDB5's sources (set FDB5_SOURCE to an ecmwf/fdb checkout)",
            false,
        );
    };
    let d = tempfile::tempdir().unwrap();
    let data = od_oper(d.path());
    for name in names {
        let Some(script) = upstream_script(&format!("tests/fdb/tools/list/{name}.sh.in")) else {
            return skip::skip(name, "FDB5's list tests in FDB5_SOURCE", false);
        };
        let mut outputs = Vec::new();
        for side in ["fdb5", "ours"] {
            let top = d.path().join(name).join(side);
            let (build, home, src, work) = (
                top.join("build"),
                top.join("home"),
                top.join("src"),
                top.join("x/y"),
            );
            for dir in [&build, &home.join("etc/fdb"), &src, &work] {
                std::fs::create_dir_all(dir).unwrap();
            }
            std::fs::copy(schema(), home.join("etc/fdb/schema")).unwrap();
            std::fs::write(src.join("local.yaml"), &local_yaml).unwrap();
            // The script takes `../../../od.oper.grib` from its test directory under `work`.
            std::fs::copy(&data, top.join("od.oper.grib")).unwrap();
            let bin = if side == "fdb5" {
                PathBuf::from("/usr/bin")
            } else {
                install(&build.join("bin"));
                build.join("bin")
            };
            let bin_root = bin.parent().unwrap().display().to_string();
            let configured = script
                .replace("@CMAKE_BINARY_DIR@", &bin_root)
                .replace("@PROJECT_BINARY_DIR@", &home.display().to_string())
                .replace("@CMAKE_CURRENT_SOURCE_DIR@", &src.display().to_string())
                .replace("@CMAKE_CURRENT_BINARY_DIR@", &work.display().to_string());
            let file = top.join(format!("{name}.sh"));
            std::fs::write(&file, configured).unwrap();
            let o = Command::new("bash")
                .arg(&file)
                .current_dir(&top)
                .env_remove("FDB_CONFIG")
                .env_remove("FDB5_CONFIG")
                .env_remove("FDB_CONFIG_FILE")
                .env_remove("FIELDSTORE_LOG")
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{name} on {side}: {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            outputs.push(keys_sorted(&normalised(&o.stdout, &top)));
        }
        let (ours, theirs) = (&outputs[1], &outputs[0]);
        for (i, (o, t)) in ours.lines().zip(theirs.lines()).enumerate() {
            assert_eq!(
                o,
                t,
                "{name}: line {} differs: ours (left), FDB5's (right)",
                i + 1
            );
        }
        assert_eq!(ours, theirs, "{name}: ours (left), FDB5's (right)");
    }
}

/// Each run of listed keys sorted. FDB5 lists a database's indexes newest first; fieldstore does
/// too until it merges them (as its flushes do, size-tiered), after which a merged index lists
/// in key order. The keys listed must be the same, their order within one listing may differ.
fn keys_sorted(text: &str) -> String {
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with('{') {
            run.push(line);
            continue;
        }
        run.sort_unstable();
        out.append(&mut run);
        out.push(line);
    }
    run.sort_unstable();
    out.append(&mut run);
    out.concat()
}

/// Upstream's `fdb-axes` test (5.10 has no fdb-axes): it compares the output with the forms it
/// expects itself, byte for byte (`cmp`), so passing it unchanged is the comparison.
#[test]
fn fdb5s_own_axes_test_passes() {
    if !have("grib_set") {
        return skip::skip("fdb5s_own_axes_test_passes", "ecCodes' grib_set", true);
    }
    let (Some(script), Some(local), Some(grib)) = (
        upstream_script("tests/fdb/tools/fdb_axes.sh.in"),
        upstream_file("tests/fdb/tools/local.yaml"),
        upstream_file("tests/fdb/tools/x.grib"),
    ) else {
        return skip::skip(
            "fdb5s_own_axes_test_passes",
            "FDB5's sources (set FDB5_SOURCE to an ecmwf/fdb checkout)",
            false,
        );
    };
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    for dir in ["build/bin", "home/etc/fdb", "src", "work"] {
        std::fs::create_dir_all(p(dir)).unwrap();
    }
    install(&p("build/bin"));
    std::fs::copy(schema(), p("home/etc/fdb/schema")).unwrap();
    std::fs::write(p("src/local.yaml"), local).unwrap();
    std::fs::write(p("src/x.grib"), grib).unwrap();
    let configured_script = script
        .replace("@CMAKE_BINARY_DIR@", &p("build").display().to_string())
        .replace("@PROJECT_BINARY_DIR@", &p("home").display().to_string())
        .replace(
            "@CMAKE_CURRENT_SOURCE_DIR@",
            &p("src").display().to_string(),
        )
        .replace(
            "@CMAKE_CURRENT_BINARY_DIR@",
            &p("work").display().to_string(),
        );
    std::fs::write(p("fdb_axes.sh"), configured_script).unwrap();
    let o = Command::new("bash")
        .arg(p("fdb_axes.sh"))
        .env("ECCODES_BINARY_PATH", "/usr/bin")
        .env_remove("FDB_CONFIG")
        .env_remove("FDB5_CONFIG")
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FIELDSTORE_LOG")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("IndexAxis[axis={class=(rd),date=(20201102)"),
        "{out}"
    );
}

#[test]
fn file_names_are_set_aside() {
    assert_eq!(
        file_names("a/b/x.1.data],offset=0 /r/y.data\n", ".data", "F.data"),
        "a/b/F.data],offset=0 /r/F.data\n"
    );
    assert_eq!(file_names("no data here\n", ".data", "F"), "no data here\n");
}
