//! FDB5's tool names installed by scripts/install-fdb-tools: a shell script written for FDB5's
//! tools runs on fieldstore with the install directory first on PATH, and where FDB5 is installed
//! its porcelain listing of the same fields is the real `fdb-list`'s.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{configured, fdb5_listing, have_fdb5, run};

const BASE: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

/// Installs the names into `dir` with the test's own binary; the script's stdout.
fn install(dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-fdb-tools");
    run(Command::new(script)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_fieldstore"))
        .arg(dir))
}

/// A store at `root` with FDB5's ECMWF schema; its config file.
fn store(d: &Path, root: &Path) -> PathBuf {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
    std::fs::create_dir_all(root).unwrap();
    let config = d.join(format!(
        "{}.yaml",
        root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema.display(),
            root.display()
        ),
    )
    .unwrap();
    config
}

fn sample(out: &Path) {
    run(Command::new(env!("CARGO_BIN_EXE_fieldstore")).args([
        "sample",
        "--out",
        out.to_str().unwrap(),
        "--params",
        "t/u",
        "--levels",
        "1000/500",
        "--steps",
        "0/6",
        "--points",
        "100",
    ]));
}

/// Runs `script` in bash with `bin` first on PATH and the store of `config`.
fn bash(script: &str, bin: &Path, config: &Path, home: &Path) -> Output {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    configured(&mut Command::new("bash"), config, home)
        .args(["-euo", "pipefail", "-c", script])
        .env("PATH", path)
        .env_remove("FIELDSTORE_LOG")
        .output()
        .unwrap()
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn install_puts_every_name_as_a_link_to_the_binary() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("nested/bin");
    let out = install(&bin);
    let names: Vec<&str> = out.lines().filter_map(|l| l.split(" -> ").next()).collect();
    assert_eq!(names.len(), 17, "{out}");
    for t in ["fdb-write", "fdb-read", "fdb-list", "fdb-axes", "fdb-wipe"] {
        let link = bin.join(t);
        assert_eq!(
            std::fs::canonicalize(&link).unwrap(),
            std::fs::canonicalize(env!("CARGO_BIN_EXE_fieldstore")).unwrap(),
            "{t}"
        );
    }
    // Installing again replaces the links; a real file in the way is kept and reported.
    std::fs::remove_file(bin.join("fdb-list")).unwrap();
    std::fs::write(bin.join("fdb-list"), "#!/bin/sh\n").unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-fdb-tools");
    let o = Command::new(script)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_fieldstore"))
        .arg(&bin)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not overwritten"));
    assert_eq!(
        std::fs::read_to_string(bin.join("fdb-list")).unwrap(),
        "#!/bin/sh\n"
    );
}

#[test]
fn an_fdb5_script_runs_on_the_installed_names() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let bin = p("bin");
    install(&bin);
    let config = store(d.path(), &p("root"));
    let grib = p("in.grib");
    sample(&grib);
    std::fs::write(
        p("req"),
        format!("retrieve,{BASE},domain=g,type=fc,levtype=pl,step=0/6,levelist=1000,param=130\n"),
    )
    .unwrap();
    let script = format!(
        r#"
cd {dir}
fdb-write --verbose in.grib
fdb-list --porcelain --all --minimum-keys= > listing
fdb-list --location class=od,expver=0001 > located
fdb-read req out.grib
fdb-axes --json class=od,expver=0001 > axes.json
fdb-where --porcelain {BASE} > where
fdb-wipe --doit {BASE} > wiped
fdb-list --porcelain --all --minimum-keys= > after
fdb-wipe --ignore-no-data --doit {BASE}
if fdb-wipe --doit {BASE} 2> nothing; then exit 3; fi
fdb-info --schema > schema
"#,
        dir = d.path().display()
    );
    let o = bash(&script, &bin, &config, d.path());
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let read = |n: &str| std::fs::read_to_string(p(n)).unwrap();
    let listing = sorted_lines(&read("listing"));
    assert_eq!(listing.len(), 8, "{listing:?}");
    assert!(listing[0].starts_with(&format!("{{{BASE},domain=g}}{{type=fc,levtype=pl}}{{")));
    // FDB5's form: the request first, then each key with its location.
    let located = read("located");
    assert!(
        located.starts_with("Listing for request\nretrieve,\n\tclass=od,\n\texpver=0001\n\n\n{")
    );
    let keys: Vec<&str> = located.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(keys.len(), 8);
    assert!(keys
        .iter()
        .all(|l| l.contains("} TocFieldLocation[uri=URI[scheme=file,name=/")));
    // Two steps of param 130 at level 1000.
    let out = std::fs::read(p("out.grib")).unwrap();
    assert_eq!(out.windows(4).filter(|w| w == b"GRIB").count(), 2);
    let axes: serde_json::Value = serde_json::from_str(&read("axes.json")).unwrap();
    // FDB5's form: values as text, in text order.
    assert_eq!(axes["levelist"], serde_json::json!(["1000", "500"]));
    assert!(read("where")
        .trim_end()
        .ends_with("od:0001:oper:20261122:1200:g"));
    assert!(read("wiped").starts_with("Wiping for request\nretrieve,\n"));
    assert!(read("wiped").contains("\nrmdir: "));
    assert_eq!(read("after"), "");
    assert!(read("nothing").contains("no database matches"));
    assert!(read("schema").trim_end().ends_with("ecmwf-fdb5-schema"));
}

#[test]
fn unknown_names_and_flags_fail_naming_what_is_accepted() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    install(&bin);
    let config = store(d.path(), &d.path().join("root"));
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_fieldstore"), bin.join("fdb-copy")).unwrap();
    for (script, says) in [
        ("fdb-copy --all", "FDB5 tool names it answers to: fdb-write"),
        (
            "fdb-list --bogus --all",
            "unknown option --bogus; accepted:",
        ),
        ("fdb-list class=od", "lacks expver"),
        (
            "fdb-write --modifiers=expver=0042 x.grib",
            "does not support",
        ),
        ("fdb-read only-one-arg", "expected 2 arguments"),
    ] {
        let o = bash(script, &bin, &config, d.path());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{script}: {err}");
        assert!(err.contains(says), "{script}: {err}");
        assert!(o.stdout.is_empty(), "{script}");
    }
}

#[test]
fn porcelain_listing_and_where_are_fdb5s() {
    if !have_fdb5() {
        return skip::skip(
            "porcelain_listing_and_where_are_fdb5s",
            "FDB5's fdb-write",
            true,
        );
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let bin = p("bin");
    install(&bin);
    let grib = p("in.grib");
    sample(&grib);
    // Each in its own root: FDB5 and fieldstore do not share a database directory.
    let theirs_config = store(d.path(), &p("fdb5"));
    run(configured(
        &mut Command::new("/usr/bin/fdb-write"),
        &theirs_config,
        d.path(),
    )
    .arg(&grib));
    let theirs = fdb5_listing(&theirs_config, d.path());
    let ours_config = store(d.path(), &p("ours"));
    let o = bash(
        &format!(
            "fdb-write {g} && fdb-list --porcelain --all --minimum-keys=",
            g = grib.display()
        ),
        &bin,
        &ours_config,
        d.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // fdb-write's own lines (Processing..., FDB archive...) come first, as FDB5's.
    let ours: Vec<String> = sorted_lines(&String::from_utf8_lossy(&o.stdout))
        .into_iter()
        .filter(|l| l.starts_with('{'))
        .collect();
    assert_eq!(ours.len(), 8);
    assert_eq!(ours, theirs);
    // fdb-where: the same database directory under each root.
    let where_ = format!("fdb-where {BASE}");
    let theirs = run(configured(
        &mut Command::new("/usr/bin/fdb-where"),
        &theirs_config,
        d.path(),
    )
    .arg(BASE));
    let o = bash(&where_, &bin, &ours_config, d.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        ours.replace(&p("ours").display().to_string(), "ROOT"),
        theirs.replace(&p("fdb5").display().to_string(), "ROOT")
    );
}

#[test]
fn fdb_info_answers_as_fdb5s() {
    if !have_fdb5() {
        return skip::skip("fdb_info_answers_as_fdb5s", "FDB5's fdb-info", true);
    }
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    install(&bin);
    let config = store(d.path(), &d.path().join("root"));
    for flag in ["--schema", "--home", "--config-file"] {
        let theirs =
            run(configured(&mut Command::new("/usr/bin/fdb-info"), &config, d.path()).arg(flag));
        let ours = bash(&format!("fdb-info {flag}"), &bin, &config, d.path());
        assert!(ours.status.success(), "{flag}");
        assert_eq!(String::from_utf8_lossy(&ours.stdout), theirs, "{flag}");
    }
    // As FDB5's own fdb_info test checks: no flag, no output.
    let theirs = run(configured(
        &mut Command::new("/usr/bin/fdb-info"),
        &config,
        d.path(),
    ));
    let ours = bash("fdb-info", &bin, &config, d.path());
    assert!(ours.status.success());
    assert_eq!(String::from_utf8_lossy(&ours.stdout), theirs);
    assert_eq!(theirs, "");
    // The version is the FDB5 level the C library's fdb_version() reports, not Debian's.
    let ours = bash("fdb-info --version", &bin, &config, d.path());
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        format!("{}\n", fieldstore::FDB5_API_LEVEL.to_string_lossy())
    );
    // --all: every item labelled, the last one as FDB5 built without Lustre.
    let ours = String::from_utf8_lossy(&bash("fdb-info --all", &bin, &config, d.path()).stdout)
        .into_owned();
    assert!(ours.starts_with("Version: 5."), "{ours}");
    assert!(ours.ends_with("\nLustre-API: disabled\n"), "{ours}");
}

/// Timings vary run to run: in a line eckit times, the numbers and byte units after `from` are
/// masked (`in N second (N bytes per second)`); everything before it is compared as it is.
fn mask_timing(line: &str, from: &str) -> String {
    let Some(at) = line.find(from) else {
        return line.to_string();
    };
    let (kept, timed) = line.split_at(at + from.len());
    let masked: Vec<String> = timed
        .split(' ')
        .map(|t| {
            let bare = t.trim_start_matches('(').trim_end_matches(')');
            let unit = bare
                .strip_suffix("bytes")
                .or_else(|| bare.strip_suffix("byte"))
                .is_some_and(|p| p.len() <= 1);
            let what = if bare.parse::<f64>().is_ok() {
                "N"
            } else if unit {
                "bytes"
            } else if bare == "seconds" {
                "second"
            } else {
                bare
            };
            t.replace(bare, what)
        })
        .collect();
    format!("{kept}{}", masked.join(" "))
}

/// What `fdb-write` and `fdb-read` print, timings masked: each line as it is but for the
/// numbers eckit's timers put in it.
fn masked(out: &[u8]) -> String {
    String::from_utf8_lossy(out)
        .split_inclusive('\n')
        .map(|l| {
            for from in [", in ", "fdb::service::archive: ", "Save into: ", " rate: "] {
                if l.contains(from) {
                    return mask_timing(l, from);
                }
            }
            l.to_string()
        })
        .collect()
}

/// Regression: called as `fdb-write` and `fdb-read`, fieldstore printed lines FDB5 does not
/// (`archived 8 fields, ...` and `read N bytes` on stderr), so scripts capturing `2>&1` saw a
/// difference. Now both streams are FDB5 5.10.8's: the same lines on stdout (timings aside),
/// nothing on stderr.
#[test]
fn write_and_read_print_what_fdb5s_print_on_the_same_streams() {
    if !have_fdb5() {
        return skip::skip(
            "write_and_read_print_what_fdb5s_print_on_the_same_streams",
            "FDB5's fdb-write and fdb-read",
            true,
        );
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let bin = p("bin");
    install(&bin);
    sample(&p("in.grib"));
    std::fs::create_dir_all(p("sub")).unwrap();
    std::fs::copy(p("in.grib"), p("sub/one.grib")).unwrap();
    // Two requests, one needing expansion (values canonical, ranges expanded), one written as
    // FDB5 expands them.
    std::fs::write(
        p("req"),
        "retrieve,class=od,expver=1,stream=oper,date=20261122,time=12,domain=g,type=fc,\
         levtype=pl,levelist=1000,param=t/u,step=0/to/6/by/6\n\
         retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,\
         levtype=pl,levelist=500,param=130,step=6\n",
    )
    .unwrap();
    let cmds = [
        "fdb-write in.grib",
        "fdb-write --verbose in.grib ./sub//one.grib",
        "fdb-read req out.grib",
        "fdb-read --raw req out.grib",
    ];
    let mut sides = Vec::new();
    for (side, tools) in [("fdb5", PathBuf::from("/usr/bin")), ("ours", bin.clone())] {
        let config = store(d.path(), &p(side));
        let mut outputs = Vec::new();
        for cmd in cmds {
            let o = bash(
                &format!("cd {} && {cmd}", d.path().display()),
                &tools,
                &config,
                d.path(),
            );
            assert!(
                o.status.success(),
                "{side}: {cmd}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            let read = cmd
                .starts_with("fdb-read")
                .then(|| std::fs::read(p("out.grib")).unwrap());
            outputs.push((masked(&o.stdout), o.stderr, read));
        }
        sides.push(outputs);
    }
    for (i, cmd) in cmds.iter().enumerate() {
        let ((t_out, t_err, t_read), (o_out, o_err, o_read)) = (&sides[0][i], &sides[1][i]);
        assert_eq!(o_out, t_out, "{cmd}: stdout");
        assert_eq!(
            String::from_utf8_lossy(o_err),
            String::from_utf8_lossy(t_err),
            "{cmd}: stderr"
        );
        // With --raw FDB5 looks the request up as written, and `param=t` finds nothing;
        // fieldstore reads what the request means either way (docs/fdb-tools.md).
        if !cmd.contains("--raw") {
            assert_eq!(o_read, t_read, "{cmd}: the fields read");
        }
    }
    // What the comparison covers: FDB5 really printed these (so equal outputs are not two
    // equally empty ones).
    let (write, verbose, read) = (&sides[0][0].0, &sides[0][1].0, &sides[0][2].0);
    assert!(
        write.starts_with("Processing in.grib\nFDB archive 8 messages, size "),
        "{write}"
    );
    assert!(write.contains("\nfdb::service::archive: N second elapsed, N second cpu\n"));
    assert!(verbose.contains("Processing ./sub/one.grib\n"), "{verbose}");
    assert_eq!(verbose.matches("\nArchiving {").count(), 16, "{verbose}");
    assert!(read.starts_with(
        "retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,\
         levtype=pl,levelist=1000,param=130/131,step=0/6\n"
    ));
    assert!(
        read.ends_with("\nSave into: N second elapsed, N second cpu\n"),
        "{read}"
    );
    assert!(sides[0][3].0.starts_with(
        "retrieve,class=od,expver=1,stream=oper,date=20261122,time=12,domain=g,type=fc,\
         levtype=pl,levelist=1000,param=t/u,step=0/to/6/by/6\n"
    ));
}

/// `fdb-axes` gives FDB5's axes, oddities included (pyfdb's and GribJump's `axes` are the same):
/// an index counts whole once its own keys match (`step=0` still shows step 6), an index whose
/// summary lacks a datum value asked for does not count, and where surface and pressure-level
/// fields meet, the surface fields' missing `levelist` is the value `""`. `fieldstore axes`
/// gives the axes of the fields the request names.
#[test]
fn fdb_axes_answers_as_fdb5_and_fieldstore_axes_as_the_fields() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let bin = p("bin");
    install(&bin);
    let config = store(d.path(), &p("root"));
    sample(&p("pl.grib"));
    run(Command::new(env!("CARGO_BIN_EXE_fieldstore")).args([
        "sample",
        "--out",
        p("sfc.grib").to_str().unwrap(),
        "--params",
        "2t",
        "--levtype",
        "sfc",
        "--steps",
        "0/6",
        "--points",
        "100",
    ]));
    let script = format!(
        r#"
cd {dir}
fdb-write pl.grib sfc.grib > /dev/null
fdb-axes class=od,expver=0001
fdb-axes class=od,expver=0001,levtype=sfc,step=0
fdb-axes --json class=od,expver=0001,levelist=500
fdb-axes class=od,expver=0001,param=999
{fs} axes --json class=od,expver=0001,levtype=sfc,step=0
"#,
        dir = d.path().display(),
        fs = env!("CARGO_BIN_EXE_fieldstore")
    );
    let o = bash(&script, &bin, &config, d.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = out.lines().collect();
    let db = "class=(od),date=(20261122),domain=(g),expver=(0001)";
    assert_eq!(
        lines[0],
        format!("IndexAxis[axis={{{db},levelist=(,1000,500),levtype=(pl,sfc),param=(130,131,167),step=(0,6),stream=(oper),time=(1200),type=(fc)}}]")
    );
    // Only the empty levelist: left out, as FDB5 prints it.
    assert_eq!(
        lines[1],
        format!("IndexAxis[axis={{{db},levtype=(sfc),param=(167),step=(0,6),stream=(oper),time=(1200),type=(fc)}}]")
    );
    assert_eq!(
        lines[2],
        r#"{"class":["od"],"date":["20261122"],"domain":["g"],"expver":["0001"],"levelist":["1000","500"],"levtype":["pl"],"param":["130","131"],"step":["0","6"],"stream":["oper"],"time":["1200"],"type":["fc"]}"#
    );
    // No index holds the parameter: the databases' own values only.
    assert_eq!(
        lines[3],
        "IndexAxis[axis={class=(od),date=(20261122),domain=(g),expver=(0001),stream=(oper),time=(1200)}]"
    );
    assert_eq!(
        lines[4],
        r#"{"class":["od"],"date":["20261122"],"domain":["g"],"expver":["0001"],"levtype":["sfc"],"param":["167"],"step":["0"],"stream":["oper"],"time":["1200"],"type":["fc"]}"#
    );
}
