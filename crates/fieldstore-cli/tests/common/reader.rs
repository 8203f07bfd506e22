//! A reader running beside a move: it lists and retrieves until told to stop, and every answer
//! must hold each field exactly once.

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rounds of `list class=od` (exactly `fields` distinct lines) and `read REQUEST TARGET` (must
/// succeed; `check` may find fault with what it wrote) until `stop`; the rounds and what was
/// wrong.
pub fn rounds(
    run: impl Fn(&[&str]) -> Output,
    stop: &AtomicBool,
    fields: usize,
    request: &str,
    target: &Path,
    check: impl Fn(&Path) -> Option<String>,
) -> (usize, Vec<String>) {
    let mut rounds = 0;
    let mut errors = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let o = run(&["list", "class=od", "--porcelain"]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut lines: Vec<&str> = text.lines().collect();
        let n = lines.len();
        lines.sort();
        lines.dedup();
        if !o.status.success() || n != fields || lines.len() != fields {
            errors.push(format!(
                "list: {n} lines, {} distinct: {}",
                lines.len(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        let o = run(&["read", request, &target.to_string_lossy()]);
        if !o.status.success() {
            errors.push(format!("read: {}", String::from_utf8_lossy(&o.stderr)));
        } else if let Some(e) = check(target) {
            errors.push(format!("read: {e}"));
        }
        rounds += 1;
    }
    (rounds, errors)
}
