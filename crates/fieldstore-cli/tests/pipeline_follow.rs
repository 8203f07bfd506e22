//! Plans on the store's stream of flushed fields (`fieldstore pipeline follow`), killed with
//! SIGKILL at random instants and started again, 20 rounds, while a month of hourly fields is
//! archived a few days at a time: the daily means it leaves in the store (and in its file sink)
//! are byte for byte those of an uninterrupted follower over the same fields, none missing, none
//! archived twice (`list --full` shows no masked copy). Also: `pipeline replay` of the same plan
//! over the stored month gives the same means; outputs never replace inputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");
const DAYS: i64 = 31;
const POINTS: usize = 496; // regular_ll_sfc_grib2.tmpl

fn run(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fs(config: &Path, args: &[&str]) -> String {
    run(Command::new(FS).arg("--config").arg(config).args(args))
}

/// One GRIB file per day: 24 hourly 2 m temperature fields (GRIB2, regular lat-lon).
fn month(dir: &Path) -> Vec<PathBuf> {
    let sample = "/usr/share/eccodes/samples/regular_ll_sfc_grib2.tmpl";
    let mut files = Vec::new();
    for day in 0..DAYS {
        let out = dir.join(format!("day{day:02}.grib"));
        let mut rules = String::new();
        for h in 1..=24 {
            let step = day * 24 + h;
            let values: Vec<String> = (0..POINTS)
                .map(|i| {
                    let v = 260.0 + ((step * 7 + i as i64 * 3) % 23) as f64 * 0.37 + (i % 5) as f64
                        - (step % 24) as f64 * 0.25;
                    format!("{v}")
                })
                .collect();
            rules.push_str(&format!(
                "set edition=2;\nset centre=98;\nset setLocalDefinition=1;\nset localDefinitionNumber=1;\nset class=\"od\";\nset stream=\"oper\";\nset type=\"fc\";\nset expver=\"0001\";\nset date=20250101;\nset time=0;\nset paramId=167;\nset step={step};\nset bitsPerValue=0;\nset packingType=\"grid_ieee\";\nset values={{{}}};\nappend \"{}\";\n",
                values.join(","),
                out.display()
            ));
        }
        let rf = dir.join(format!("day{day:02}.rules"));
        std::fs::write(&rf, rules).unwrap();
        run(Command::new("grib_filter").arg(&rf).arg(sample));
        files.push(out);
    }
    files
}

/// A store and the plan following it, in `dir`.
fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir.join("root")).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nspaces:\n- roots:\n  - path: {}\n",
            dir.join("root").display()
        ),
    )
    .unwrap();
    let plan = dir.join("plan.yaml");
    std::fs::write(
        &plan,
        format!(
            "plans:\n  - name: daily-mean\n    actions:\n      - type: select\n        match: {{levtype: sfc}}\n      - type: statistics\n        output-frequency: 1d\n        operations: [average]\n        options: {{use-current-time: true}}\n      - type: encode\n        format: grib\n        additional-metadata: {{param: '228004'}}\n      - type: sink\n        sinks:\n          - {{type: fdb5, config: {{}}}}\n          - {{type: file, path: {}, append: true}}\n",
            dir.join("daily.grib").display()
        ),
    )
    .unwrap();
    (config, plan)
}

fn follow(config: &Path, plan: &Path, state: &Path, idle: &str) -> Command {
    let mut c = Command::new(FS);
    c.arg("--config")
        .arg(config)
        .args(["pipeline", "follow", "-q"])
        .arg(plan)
        .arg("class=od,expver=0001")
        .arg("--state")
        .arg(state)
        .args(["--idle", idle]);
    c
}

/// The daily means in the store, in step order, and how many entries `list --full` shows.
fn means(config: &Path, dir: &Path) -> (Vec<String>, usize, Vec<u8>) {
    let full = fs(
        config,
        &[
            "list",
            "class=od,expver=0001,param=228004",
            "--full",
            "--porcelain",
        ],
    );
    let out = dir.join("means.grib");
    let _ = std::fs::remove_file(&out);
    let steps: Vec<String> = (1..=DAYS).map(|d| (d * 24).to_string()).collect();
    fs(
        config,
        &[
            "read",
            &format!(
                "class=od,expver=0001,stream=oper,date=20250101,time=0000,domain=g,type=fc,levtype=sfc,param=228004,step={}",
                steps.join("/")
            ),
            out.to_str().unwrap(),
        ],
    );
    let mut lines: Vec<String> = full.lines().map(str::to_string).collect();
    lines.sort();
    (lines.clone(), lines.len(), std::fs::read(&out).unwrap())
}

/// Byte for byte, or a short account of where they part.
fn same(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes, the uninterrupted run's {}; first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}

fn have_eccodes_tools() -> bool {
    Command::new("grib_filter")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[test]
fn a_follower_killed_20_times_leaves_the_daily_means_of_an_uninterrupted_one() {
    assert!(
        have_eccodes_tools(),
        "grib_filter (libeccodes-tools) is needed: scripts/install-deps installs it"
    );
    let d = tempfile::tempdir().unwrap();
    let days = month(d.path());

    // The reference: every day archived, one follower run to the end.
    let reference = d.path().join("reference");
    let (rconfig, rplan) = setup(&reference);
    for f in &days {
        fs(&rconfig, &["write", f.to_str().unwrap()]);
    }
    run(&mut follow(&rconfig, &rplan, &reference.join("state"), "1"));
    let (rlist, rcount, rbytes) = means(&rconfig, &reference);
    assert_eq!(rcount, DAYS as usize, "{rlist:#?}");

    // Killed: days archived a few at a time, the follower killed at a random instant each round.
    let killed = d.path().join("killed");
    let (kconfig, kplan) = setup(&killed);
    let state = killed.join("state");
    let mut seed: u64 = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut next_day = 0usize;
    let mut killed_mid_run = 0;
    for round in 0..20 {
        let upto = ((round + 1) * days.len()).div_ceil(20);
        for f in &days[next_day..upto] {
            fs(&kconfig, &["write", f.to_str().unwrap()]);
        }
        next_day = upto;
        let mut child = follow(&kconfig, &kplan, &state, "30")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + rand(250)));
        if child.try_wait().unwrap().is_none() {
            killed_mid_run += 1;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    assert!(
        killed_mid_run >= 15,
        "only {killed_mid_run} of 20 rounds killed a running follower"
    );
    // The last follower, uninterrupted, takes what is left.
    let last = run(&mut follow(&kconfig, &kplan, &state, "1"));
    let (klist, kcount, kbytes) = means(&kconfig, &killed);
    assert_eq!(klist, rlist, "{last}");
    assert_eq!(
        kcount, DAYS as usize,
        "a daily mean missing or archived twice: {klist:#?}"
    );
    same(&kbytes, &rbytes, "the daily means in the store");
    // The file sink too: each mean once, in order.
    same(
        &std::fs::read(killed.join("daily.grib")).unwrap(),
        &std::fs::read(reference.join("daily.grib")).unwrap(),
        "the file sink",
    );
    // One provenance record per mean, naming the plan and the window's inputs.
    let prov = std::fs::read_to_string(state.join("provenance.jsonl")).unwrap();
    assert_eq!(prov.lines().count(), DAYS as usize, "{prov}");
    let first: serde_json::Value = serde_json::from_str(prov.lines().next().unwrap()).unwrap();
    assert_eq!(first["window"]["step"], "24");
    assert!(
        first["inputs"].as_str().unwrap().contains("step=0/to/24"),
        "{first}"
    );
    assert_eq!(first["plan_sha256"].as_str().unwrap().len(), 64);

    // Replaying the plan over the stored month in a fresh store gives the same means.
    let replayed = d.path().join("replayed");
    let (pconfig, pplan) = setup(&replayed);
    for f in &days {
        fs(&pconfig, &["write", f.to_str().unwrap()]);
    }
    let out = fs(
        &pconfig,
        &[
            "pipeline",
            "replay",
            "-q",
            pplan.to_str().unwrap(),
            "class=od,expver=0001,param=167",
        ],
    );
    assert!(out.contains(&format!("{DAYS} outputs archived")), "{out}");
    let (_, pcount, pbytes) = means(&pconfig, &replayed);
    assert_eq!(pcount, DAYS as usize);
    same(&pbytes, &rbytes, "the replayed means");
    // A second replay archives nothing: every output is stored already.
    let again = fs(
        &pconfig,
        &[
            "pipeline",
            "replay",
            "-q",
            pplan.to_str().unwrap(),
            "class=od,expver=0001,param=167",
        ],
    );
    assert!(
        again.contains(&format!("0 outputs archived, {DAYS} already stored")),
        "{again}"
    );
}

#[test]
fn an_output_that_would_replace_an_input_fails_alone_and_the_input_stays() {
    assert!(
        have_eccodes_tools(),
        "grib_filter (libeccodes-tools) is needed"
    );
    let d = tempfile::tempdir().unwrap();
    let days = month(d.path());
    let (config, plan) = setup(d.path());
    // The statistic keeps the input's param: its key (step=24, param=167) is an input's.
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(
        &plan,
        text.replace("        additional-metadata: {param: '228004'}\n", ""),
    )
    .unwrap();
    fs(&config, &["write", days[0].to_str().unwrap()]);
    let before = fs(
        &config,
        &["list", "class=od,expver=0001", "--full", "--porcelain"],
    );
    let o = follow(&config, &plan, &d.path().join("state"), "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("would replace a field of the store that this pipeline did not write"),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("24 fields"),
        "{err}"
    );
    assert_eq!(
        fs(
            &config,
            &["list", "class=od,expver=0001", "--full", "--porcelain"]
        ),
        before,
        "an input was replaced"
    );
}

#[test]
fn pipelines_named_in_the_config_follow_the_store() {
    assert!(
        have_eccodes_tools(),
        "grib_filter (libeccodes-tools) is needed"
    );
    let d = tempfile::tempdir().unwrap();
    let days = month(d.path());
    let (config, plan) = setup(d.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "pipelines:\n- name: daily\n  plan: {}\n  request: class=od,expver=0001,param=167\n",
        plan.display()
    ));
    std::fs::write(&config, text).unwrap();
    for f in &days[..3] {
        fs(&config, &["write", f.to_str().unwrap()]);
    }
    let out = fs(&config, &["pipeline", "follow", "-q", "--idle", "1"]);
    assert!(out.starts_with("daily: 72 fields"), "{out}");
    assert!(out.contains("3 outputs archived"), "{out}");
    // Its state is kept in the root, out of the way of listings.
    let prov = d.path().join("root/.pipelines/daily/provenance.jsonl");
    assert_eq!(std::fs::read_to_string(prov).unwrap().lines().count(), 3);
    // Started again, it goes on from there.
    fs(&config, &["write", days[3].to_str().unwrap()]);
    let out = fs(
        &config,
        &["pipeline", "follow", "-q", "--idle", "1", "--name", "daily"],
    );
    assert!(
        out.contains("96 fields") && out.contains("4 outputs archived"),
        "{out}"
    );
    // Names it does not have are refused.
    let o = Command::new(FS)
        .arg("--config")
        .arg(&config)
        .args(["pipeline", "follow", "--name", "weekly"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("names no pipeline 'weekly'"));
}

#[test]
fn a_server_runs_the_pipelines_of_its_config() {
    assert!(
        have_eccodes_tools(),
        "grib_filter (libeccodes-tools) is needed"
    );
    let d = tempfile::tempdir().unwrap();
    let days = month(d.path());
    let (config, plan) = setup(d.path());
    let served = d.path().join("served.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "pipelines:\n- name: daily\n  plan: {}\n  request: class=od,param=167\n",
        plan.display()
    ));
    std::fs::write(&served, text).unwrap();
    let mut server = Command::new(FS)
        .arg("--config")
        .arg(&served)
        .args(["server", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("listening on"), "{line}");
    // Archived by another process, into the store the server serves.
    for f in &days[..2] {
        fs(&config, &["write", f.to_str().unwrap()]);
    }
    let mut found = String::new();
    for _ in 0..100 {
        let o = Command::new(FS)
            .arg("--config")
            .arg(&config)
            .args(["list", "class=od,param=228004", "--porcelain"])
            .output()
            .unwrap();
        found = String::from_utf8_lossy(&o.stdout).into_owned();
        if found.lines().count() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(found.lines().count(), 2, "{found}");
}

#[test]
fn a_changed_plan_or_a_damaged_checkpoint_is_refused_naming_the_state() {
    assert!(
        have_eccodes_tools(),
        "grib_filter (libeccodes-tools) is needed"
    );
    let d = tempfile::tempdir().unwrap();
    let days = month(d.path());
    let (config, plan) = setup(d.path());
    let state = d.path().join("state");
    fs(&config, &["write", days[0].to_str().unwrap()]);
    run(&mut follow(&config, &plan, &state, "1"));
    let refused = |what: &str, says: &str| {
        let o = follow(&config, &plan, &state, "1").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
        assert!(err.contains(&*state.to_string_lossy()), "{what}: {err}");
    };
    // Its windows would not fit another plan: the checkpoint is kept, the run refused.
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(&plan, text.replace("[average]", "[average, maximum]")).unwrap();
    refused("changed plan", "was made by another version of");
    std::fs::write(&plan, &text).unwrap();
    let cp = state.join("checkpoint.json");
    let good = std::fs::read(&cp).unwrap();
    std::fs::write(&cp, &good[..good.len() / 2]).unwrap();
    refused("damaged checkpoint", "damaged checkpoint");
    // Put back, it goes on.
    std::fs::write(&cp, &good).unwrap();
    fs(&config, &["write", days[1].to_str().unwrap()]);
    let out = run(&mut follow(&config, &plan, &state, "1"));
    assert!(
        out.contains("48 fields") && out.contains("2 outputs archived"),
        "{out}"
    );
}

#[test]
fn a_replay_of_nothing_and_a_missing_plan_are_errors_naming_them() {
    let d = tempfile::tempdir().unwrap();
    let (config, plan) = setup(d.path());
    let o = Command::new(FS)
        .arg("--config")
        .arg(&config)
        .args([
            "pipeline",
            "replay",
            "-q",
            plan.to_str().unwrap(),
            "class=od,expver=9999",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("nothing stored matches class=od,expver=9999"),
        "{err}"
    );
    let missing = d.path().join("no-such-plan.yaml");
    let o = follow(&config, &missing, &d.path().join("state"), "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}: cannot read the plan file", missing.display())),
        "{err}"
    );
}
