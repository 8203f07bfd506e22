//! The README's two commands install only what each needs: the demo builds and runs fieldstore
//! (ecCodes), the test suite also brings FDB5, the reference it is compared against.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn packages(args: &[&str]) -> Vec<String> {
    let o = Command::new(repo().join("scripts/install-deps"))
        .arg("--print")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_demo_installs_no_fdb5_and_the_tests_do() {
    let demo = packages(&[]);
    assert!(demo.contains(&"libeccodes-dev".to_string()), "{demo:?}");
    assert!(
        !demo
            .iter()
            .any(|p| p.starts_with("fdb5") || p.contains("fdb")),
        "{demo:?}"
    );
    let tests = packages(&["--tests"]);
    assert!(tests.contains(&"fdb5".to_string()), "{tests:?}");
    // The scripts ask for what they need.
    let script = |p: &str| std::fs::read_to_string(repo().join(p)).unwrap();
    let demo_calls: Vec<String> = script("scripts/demo")
        .lines()
        .filter(|l| l.trim_start().starts_with("scripts/install-deps"))
        .map(str::to_string)
        .collect();
    assert_eq!(demo_calls, ["scripts/install-deps"], "scripts/demo");
    assert!(script("scripts/test").contains("scripts/install-deps --tests"));
    assert!(script("bench/install-deps").contains("scripts/install-deps --tests"));
}
