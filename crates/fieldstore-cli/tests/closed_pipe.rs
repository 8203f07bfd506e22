//! A reader that closes the pipe early (`fieldstore stats | head`) ends every command quietly,
//! as it ends any Unix tool: exit 0, no panic message.

mod common;

use std::process::Stdio;

#[test]
fn every_printing_command_ends_quietly_on_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            dir.path().join("root").display()
        ),
    )
    .unwrap();
    let grib = dir.path().join("s.grib");
    let run = |args: &[&str]| {
        let o = common::fieldstore()
            .args(args)
            .env("FDB_CONFIG_FILE", &config)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(&[
        "sample",
        "--out",
        grib.to_str().unwrap(),
        "--steps",
        "0/6",
        "--points",
        "50",
    ]);
    run(&["write", grib.to_str().unwrap()]);
    let db = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
    let commands: Vec<Vec<&str>> = vec![
        vec!["info"],
        vec!["stats", db],
        vec!["dump", db],
        vec!["axes", db],
        vec!["axes", db, "--json"],
        vec!["where", db],
        vec!["list", db],
        vec!["purge", db],
        vec!["wipe", db],
        vec!["control", "status", db],
        vec!["request", "expand", "retrieve,class=od,param=t/u,step=0/to/24/by/6"],
        vec!["schema", "show"],
        vec!["read", "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,levelist=500,param=t,step=0", "-"],
    ];
    for args in commands {
        let mut child = common::fieldstore()
            .args(&args)
            .env("FDB_CONFIG_FILE", &config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before the command has written anything.
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && !stderr.contains("panicked"),
            "{args:?} on a closed pipe: {:?}\n{stderr}",
            o.status
        );
    }
}
