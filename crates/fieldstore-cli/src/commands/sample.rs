//! `fieldstore sample`: realistic GRIB fields made with ecCodes, for demos and tests.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fieldstore::grib::{
    params,
    sample::{make_field, make_global_field},
};

#[derive(Args, Debug)]
pub struct SampleArgs {
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "20261122")]
    date: String,
    #[arg(long, default_value = "1200")]
    time: String,
    /// Parameters by name or id, `/`-separated.
    #[arg(long, default_value = "t/u/v")]
    params: String,
    /// Pressure levels, `/`-separated.
    #[arg(long, default_value = "1000/850/500")]
    levels: String,
    #[arg(long, default_value = "0/6/12")]
    steps: String,
    /// Ensemble members (perturbed forecasts 1..N, written after the deterministic forecast).
    #[arg(long, default_value_t = 0)]
    members: u32,
    /// Grid points per field (about 2 bytes each).
    #[arg(long, default_value_t = 1000)]
    points: usize,
    /// A global regular lat/lon grid of NI x NJ points instead, with smooth values (e.g.
    /// 3600x1801: 0.1 degree, 6.48 M points).
    #[arg(long, value_name = "NIxNJ", conflicts_with = "points")]
    grid: Option<String>,
    #[arg(long, default_value = "od")]
    class: String,
    #[arg(long, default_value = "0001")]
    expver: String,
    /// `pl` (pressure levels, from --levels) or `sfc` (surface: no level).
    #[arg(long, default_value = "pl", value_parser = ["pl", "sfc"])]
    levtype: String,
}

pub fn run(a: SampleArgs) -> Result<()> {
    let split = |s: &str| s.split('/').map(str::to_string).collect::<Vec<_>>();
    let mut param_ids = Vec::new();
    for p in split(&a.params) {
        let id = if p.chars().all(|c| c.is_ascii_digit()) {
            p.clone()
        } else {
            params::param_id(&p)?.with_context(|| format!("unknown parameter '{p}'"))?
        };
        param_ids.push(id);
    }
    let (mut levels, steps) = (split(&a.levels), split(&a.steps));
    let sfc = a.levtype == "sfc";
    if sfc {
        levels = vec![String::new()];
    }
    if levels.is_empty() || steps.is_empty() {
        bail!("need at least one level and one step");
    }
    let grid = match &a.grid {
        None => None,
        Some(g) => {
            let parsed = g
                .split_once(['x', 'X'])
                .and_then(|(i, j)| Some((i.parse::<usize>().ok()?, j.parse::<usize>().ok()?)));
            match parsed {
                Some(p) => Some(p),
                None => bail!("--grid {g}: expected NIxNJ, e.g. 3600x1801"),
            }
        }
    };
    let mut out = BufWriter::new(
        std::fs::File::create(&a.out)
            .with_context(|| format!("cannot create {}", a.out.display()))?,
    );
    let mut n = 0u64;
    let mut write = |stream: &str,
                     ty: &str,
                     step: &str,
                     level: &str,
                     param: &str,
                     member: Option<&str>|
     -> Result<()> {
        let mut keys = vec![
            ("class", a.class.as_str()),
            ("stream", stream),
            ("type", ty),
            ("expver", a.expver.as_str()),
            ("date", a.date.as_str()),
            ("time", a.time.as_str()),
            ("step", step),
            ("levtype", a.levtype.as_str()),
            ("param", param),
        ];
        if !sfc {
            keys.push(("levelist", level));
        }
        if let Some(m) = member {
            keys.push(("number", m));
        }
        n += 1;
        let field = match grid {
            Some((ni, nj)) => make_global_field(&keys, ni, nj, n)?,
            None => make_field(&keys, a.points, n)?,
        };
        out.write_all(&field)?;
        Ok(())
    };
    // Order: as a retrieve of the same request returns them (datum keys step, number, level,
    // param): the deterministic forecast, then the members.
    for step in &steps {
        for level in &levels {
            for p in &param_ids {
                write("oper", "fc", step, level, p, None)?;
            }
        }
    }
    for step in &steps {
        for m in 1..=a.members {
            let ms = m.to_string();
            for level in &levels {
                for p in &param_ids {
                    write("enfo", "pf", step, level, p, Some(&ms))?;
                }
            }
        }
    }
    out.flush()?;
    eprintln!("wrote {n} fields to {}", a.out.display());
    Ok(())
}
