//! Side by side with the real FDB5 (Debian `fdb5`, installed by scripts/install-deps): the same GRIB
//! corpus and the same YAML config give the same listing and byte-identical fields.

use std::path::Path;
use std::process::Command;

#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{configured, fdb5_listing, have_fdb5, run};

/// GRIB messages of a file, sorted: retrieval order is not part of the comparison.
fn messages(path: &Path) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> =
        fieldstore::grib::MessageReader::new(std::fs::File::open(path).unwrap(), "t")
            .map(|m| m.unwrap().bytes)
            .collect();
    v.sort();
    v
}

#[test]
fn same_corpus_same_config_same_answers() {
    if !have_fdb5() {
        return skip::skip(
            "same_corpus_same_config_same_answers",
            "FDB5's fdb-write",
            true,
        );
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let fs = env!("CARGO_BIN_EXE_fieldstore");
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
    // Corpus: oper fc pl + sfc, and enfo pf members: several streams, types and levtypes.
    let pl = p("pl.grib");
    run(Command::new(fs).args([
        "sample",
        "--out",
        pl.to_str().unwrap(),
        "--params",
        "t/u/v",
        "--levels",
        "1000/850/500/250",
        "--steps",
        "0/6/12",
        "--members",
        "4",
        "--points",
        "300",
    ]));
    let sfc = p("sfc.grib");
    run(Command::new(fs).args([
        "sample",
        "--out",
        sfc.to_str().unwrap(),
        "--levtype",
        "sfc",
        "--params",
        "2t/msl/10u",
        "--steps",
        "0/6/12/24",
        "--members",
        "3",
        "--points",
        "300",
    ]));
    let root = p("root");
    std::fs::create_dir_all(&root).unwrap();
    let config = p("config.yaml");
    std::fs::write(&config, format!("type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n", schema.display(), root.display())).unwrap();
    std::fs::create_dir_all(p("home")).unwrap();
    let home = p("home");
    let env = |c: &mut Command| {
        configured(c, &config, &home);
    };
    // FDB5 5.10.8 (metkit 1.9) takes one stream per request and needs parameter ids.
    let base = "class=od,expver=0001,date=20261122,time=1200,domain=g";
    let requests = [
        format!("retrieve,{base},stream=oper,type=fc,levtype=pl,step=0/6/12,levelist=1000/850/500/250,param=130/131/132"),
        format!("retrieve,{base},stream=enfo,type=pf,levtype=pl,step=0/6/12,number=1/2/3/4,levelist=1000/850/500/250,param=130/131/132"),
        format!("retrieve,{base},stream=oper,type=fc,levtype=sfc,step=0/6/12/24,param=167/151/165"),
        format!("retrieve,{base},stream=enfo,type=pf,levtype=sfc,step=0/6/12/24,number=1/2/3,param=167/151/165"),
    ];

    // FDB5 first, into the root; then move its databases aside and let fieldstore use the same file.
    let mut c = Command::new("fdb-write");
    env(&mut c);
    run(c.args([pl.to_str().unwrap(), sfc.to_str().unwrap()]));
    let theirs = fdb5_listing(&config, &home);
    let mut c = Command::new("fdb-read");
    env(&mut c);
    let req_file = p("req");
    std::fs::write(&req_file, requests.join("\n") + "\n").unwrap();
    run(c.args([
        req_file.to_str().unwrap(),
        p("theirs.grib").to_str().unwrap(),
    ]));
    // A request naming 180,000 keys (levels 1/to/1000, members 1/to/20): fieldstore resolves it
    // by walking what exists rather than by looking every key up; the fields and their order
    // must be FDB5's all the same.
    let big_file = p("big-req");
    std::fs::write(
        &big_file,
        format!("retrieve,{base},stream=enfo,type=pf,levtype=pl,step=0/6/12,number=1/to/20,levelist=1/to/1000,param=130/131/132\n"),
    )
    .unwrap();
    let mut c = Command::new("fdb-read");
    env(&mut c);
    run(c.args([
        big_file.to_str().unwrap(),
        p("theirs-big.grib").to_str().unwrap(),
    ]));
    std::fs::rename(&root, p("fdb5-root")).unwrap();
    std::fs::create_dir_all(&root).unwrap();

    let mut c = Command::new(fs);
    env(&mut c);
    run(c.args(["write", pl.to_str().unwrap(), sfc.to_str().unwrap()]));
    let mut c = Command::new(fs);
    env(&mut c);
    let mut ours: Vec<String> = run(c.args(["list", "--all", "--porcelain"]))
        .lines()
        .map(str::to_string)
        .collect();
    ours.sort();
    assert_eq!(ours.len(), 4 * 3 * 3 * 5 + 3 * 4 * 4, "corpus size");
    assert_eq!(ours, theirs, "listings differ");
    let mut c = Command::new(fs);
    env(&mut c);
    run(c.args([
        "read",
        req_file.to_str().unwrap(),
        p("ours.grib").to_str().unwrap(),
    ]));
    let mut c = Command::new(fs);
    env(&mut c);
    run(c.args([
        "read",
        big_file.to_str().unwrap(),
        p("ours-big.grib").to_str().unwrap(),
    ]));
    let (a, b) = (
        messages(&p("ours-big.grib")),
        messages(&p("theirs-big.grib")),
    );
    assert_eq!(
        a.len(),
        3 * 4 * 4 * 3,
        "members 1-4 of 1/to/20, all four levels"
    );
    assert!(
        a == b,
        "a large request's fields differ from FDB5's, or their order"
    );
    let (a, b) = (messages(&p("ours.grib")), messages(&p("theirs.grib")));
    assert_eq!(a.len(), ours.len());
    assert!(a == b, "retrieved fields differ from FDB5's");
    let mut corpus = messages(&pl);
    corpus.extend(messages(&sfc));
    corpus.sort();
    assert!(
        a == corpus,
        "retrieved fields differ from what was archived"
    );
}

/// `type: dist` with the same YAML: every field lands on the same lane as FDB5 5.10.8's DistFDB
/// puts it (rendezvous hash of the field key seeded with each lane's printed configuration).
#[test]
fn dist_places_fields_on_the_same_lanes_as_fdb5() {
    if !have_fdb5() {
        return skip::skip(
            "dist_places_fields_on_the_same_lanes_as_fdb5",
            "FDB5's fdb-write",
            true,
        );
    }
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n);
    let fs = env!("CARGO_BIN_EXE_fieldstore");
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
    let corpus = p("s.grib");
    run(Command::new(fs).args([
        "sample",
        "--out",
        corpus.to_str().unwrap(),
        "--params",
        "t/u/v",
        "--levels",
        "1000/500",
        "--steps",
        "0/6/12",
        "--members",
        "3",
        "--points",
        "100",
    ]));
    let lanes = ["a", "b", "c", "d"];
    let mut yaml = String::from("type: dist\nlanes:\n");
    for l in lanes {
        std::fs::create_dir_all(p(l)).unwrap();
        yaml += &format!(
            "- type: local\n  id: {l}\n  engine: toc\n  schema: {}\n  spaces: [{{handler: Default, roots: [{{path: {}}}]}}]\n",
            schema.display(),
            p(l).display()
        );
    }
    std::fs::write(p("dist.yaml"), &yaml).unwrap();
    let lane_config = |dir: &Path| {
        let c = dir.with_extension("yaml");
        std::fs::write(
            &c,
            format!(
                "type: local\nengine: toc\nschema: {}\nspaces: [{{handler: Default, roots: [{{path: {}}}]}}]\n",
                schema.display(),
                dir.display()
            ),
        )
        .unwrap();
        c
    };
    let sorted = |s: String| {
        let mut v: Vec<String> = s.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    // FDB5 first; its lanes are then moved aside and the same YAML drives fieldstore.
    run(Command::new("fdb-write")
        .arg(&corpus)
        .env("FDB5_CONFIG_FILE", p("dist.yaml")));
    let mut fdb5 = Vec::new();
    for l in lanes {
        let moved = p(&format!("fdb5-{l}"));
        std::fs::rename(p(l), &moved).unwrap();
        std::fs::create_dir_all(p(l)).unwrap();
        fdb5.push(sorted(run(Command::new("fdb-list")
            .args(["--all", "--minimum-keys=", "--porcelain"])
            .env("FDB5_CONFIG_FILE", lane_config(&moved)))));
    }
    run(Command::new(fs)
        .args(["write", corpus.to_str().unwrap()])
        .env("FDB_CONFIG_FILE", p("dist.yaml")));
    let mut total = 0;
    for (i, l) in lanes.iter().enumerate() {
        let ours = sorted(run(Command::new(fs)
            .args(["list", "--all", "--porcelain"])
            .env("FDB_CONFIG_FILE", lane_config(&p(l)))));
        assert_eq!(ours, fdb5[i], "lane {l} holds different fields");
        total += ours.len();
    }
    assert_eq!(
        total, 72,
        "3 params x 2 levels x 3 steps x (1 oper + 3 members)"
    );
    // Through the dist config, list is the union of the lanes.
    let all = sorted(run(Command::new(fs)
        .args(["list", "--all", "--porcelain"])
        .env("FDB_CONFIG_FILE", p("dist.yaml"))));
    assert_eq!(all.len(), 72);
}
