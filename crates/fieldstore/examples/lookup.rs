//! One field at a time from an open store, as a post-processing server does (bench/big-store
//! and issue 34 item 4): retrieves each request of a file (one `retrieve,...` per line, e.g.
//! a shuffled sample of `fieldstore list --porcelain`), reading every byte, and prints the
//! latency percentiles of the retrieves after the first (which opens the store's catalogue).
//!
//! Usage: lookup CONFIG REQUESTS [ROUNDS=3]

use std::io::{BufRead, Read};
use std::time::Instant;

use fieldstore::model::request::parse_request;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(config), Some(requests)) = (args.get(1), args.get(2)) else {
        return Err("usage: lookup CONFIG REQUESTS [ROUNDS]".into());
    };
    let rounds: usize = args.get(3).map(|r| r.parse()).transpose()?.unwrap_or(3);
    let text = std::fs::read_to_string(config)?;
    let cfg = fieldstore::model::config::from_yaml_str(&text, config)?;
    let opened = Instant::now();
    let fdb = fieldstore::open(&cfg)?;
    let mut reqs = Vec::new();
    for line in std::io::BufReader::new(std::fs::File::open(requests)?).lines() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let line = if line.starts_with("retrieve") {
            line.to_string()
        } else {
            // A listing's `{db}{index}{datum}`.
            format!(
                "retrieve,{}",
                line.replace("}{", ",").replace(['{', '}'], "")
            )
        };
        reqs.push(parse_request(&line)?);
    }
    let mut buf = Vec::new();
    let mut first = None;
    let mut lat = Vec::with_capacity(reqs.len() * rounds);
    for _ in 0..rounds {
        for r in &reqs {
            let t = Instant::now();
            buf.clear();
            fdb.retrieve(r)?.read_to_end(&mut buf)?;
            if buf.is_empty() {
                return Err(format!("no field for {r:?}").into());
            }
            let us = t.elapsed().as_secs_f64() * 1e6;
            if first.is_none() {
                first = Some(opened.elapsed().as_secs_f64() * 1e3);
            } else {
                lat.push(us);
            }
        }
    }
    lat.sort_by(f64::total_cmp);
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize];
    if lat.is_empty() {
        return Err("give at least two requests".into());
    }
    println!(
        "fields={} retrieves={} first_ms={:.2} p50_us={:.1} p90_us={:.1} p99_us={:.1} max_us={:.1}",
        reqs.len(),
        lat.len() + 1,
        first.unwrap_or(f64::NAN),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        lat[lat.len() - 1]
    );
    Ok(())
}
