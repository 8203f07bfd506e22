//! The model commands, driven through the real binary as a user would.

mod common;

use std::path::PathBuf;
use std::process::Output;

fn fieldstore(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = common::fieldstore();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ecmwf_schema() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
        .display()
        .to_string()
}

#[test]
fn schema_check_and_split() {
    let s = ecmwf_schema();
    let o = fieldstore(&["schema", "check", &s], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = fieldstore(
        &["schema", "split", "--schema", &s, "class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=6"],
        &[],
    );
    assert_eq!(
        stdout(&o),
        "{class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g}{type=fc,levtype=pl}{step=6,levelist=500,param=130}\n"
    );
    let o = fieldstore(&["schema", "split", "--strict", "--schema", &s, "class=od,expver=1,stream=oper,date=20190109,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=6"], &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("expver=1 is not in canonical form: expecting expver=0001"),
        "{}",
        stderr(&o)
    );
    let o = fieldstore(&["schema", "split", "--schema", &s, "class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=6,foo=bar"], &[]);
    assert!(stderr(&o).contains("{foo}"), "{}", stderr(&o));
}

#[test]
fn bad_schema_is_located_and_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        ("[ a [ b [ c ]]", ":1:1: unclosed"),
        ("x: Bogus;\n[a[b[c]]]", ":1:4: unknown key type 'Bogus'"),
    ] {
        let p = dir.path().join("s");
        std::fs::write(&p, text).unwrap();
        let o = fieldstore(&["schema", "check", p.to_str().unwrap()], &[]);
        assert_eq!(o.status.code(), Some(1));
        assert!(stderr(&o).contains(needle), "{}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn request_expand() {
    let o = fieldstore(
        &[
            "request",
            "expand",
            "retrieve,class=od,expver=1,param=t/2t,step=0/to/24/by/6,time=12:00,levelist=500.0",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "retrieve,class=od,expver=0001,param=130/167,step=0/6/12/18/24,time=1200,levelist=500\n"
    );
    let o = fieldstore(&["request", "expand", "class=od,\nparam 130"], &[]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("request line 2, column 1: expected '=' after keyword 'param'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn info_explains_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        format!(
            "type: local\nschema: {}\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            ecmwf_schema(),
            dir.path().display()
        ),
    )
    .unwrap();
    let o = fieldstore(&["info"], &[("FDB5_CONFIG_FILE", cfg.to_str().unwrap())]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "config: {} (from $FDB5_CONFIG_FILE)",
            cfg.display()
        )),
        "{out}"
    );
    assert!(out.contains("FDB_CONFIG_FILE: not set"), "{out}");
    let o = fieldstore(&["info"], &[("FDB_CONFIG_FILE", "/no/such/file.yaml")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no such file"), "{}", stderr(&o));
    let o = fieldstore(&["info"], &[("FDB_CONFIG", "{type: nope}")]);
    assert!(stderr(&o).contains("unknown type 'nope'"), "{}", stderr(&o));
}
