//! A readable outline of the frontend tree, for `fieldstore info`.

use std::fmt::{self, Write};

use super::{Actions, FdbConfig, Root};

impl FdbConfig {
    /// The outline, one line per frontend, space and root, children indented.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = self.describe_into(&mut s, 0);
        s
    }

    /// The frontend's `type:` name.
    pub fn type_name(&self) -> &'static str {
        match self {
            FdbConfig::Local(_) => "local",
            FdbConfig::Select { .. } => "select",
            FdbConfig::Dist { .. } => "dist",
            FdbConfig::Remote { .. } => "remote",
            FdbConfig::Mirror { .. } => "mirror",
            FdbConfig::Filter { .. } => "filter",
            FdbConfig::Diagnostics { .. } => "diagnostics",
        }
    }

    fn describe_into(&self, s: &mut String, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        match self {
            FdbConfig::Local(l) => {
                let schema = l
                    .schema
                    .as_ref()
                    .map_or("built-in default".to_string(), |p| p.display().to_string());
                write!(
                    s,
                    "{pad}local (engine {}, store {}), schema: {schema}",
                    l.engine, l.store
                )?;
                if let Some(m) = &l.memory {
                    write!(
                        s,
                        ", memory: {} bytes{}",
                        m.capacity,
                        m.name
                            .as_deref()
                            .map_or(String::new(), |n| format!(" named {n}"))
                    )?;
                    if let super::WhenFull::Block { timeout } = m.when_full {
                        write!(s, ", when full: block up to {} ms", timeout.as_millis())?;
                    }
                    if let Some(n) = m.retain_databases {
                        write!(s, ", retains the {n} newest databases")?;
                    }
                }
                match &l.s3 {
                    // Only bucket roots use it: they name their own buckets.
                    Some(c) if l.engine != "s3" && l.store != "s3" => {
                        write!(s, ", s3: server {} (for its bucket roots)", c.endpoint)?;
                    }
                    Some(c) => write!(
                        s,
                        ", s3: s3://{}/{} at {}",
                        c.bucket,
                        c.prefix.as_deref().unwrap_or(""),
                        c.endpoint
                    )?,
                    None => {}
                }
                if l.actions != Actions::default() {
                    write!(s, ", actions: {}", flags(&l.actions))?;
                }
                writeln!(s)?;
                for sp in &l.spaces {
                    writeln!(
                        s,
                        "{pad}  space {} (regex {}, handler {})",
                        sp.name.as_deref().unwrap_or("-"),
                        sp.regex,
                        sp.handler
                    )?;
                    for r in &sp.roots {
                        let a = Actions {
                            list: r.list,
                            retrieve: r.retrieve,
                            archive: r.archive,
                            wipe: r.wipe,
                        };
                        let name = r.name.as_deref().map_or(String::new(), |n| format!(" {n}"));
                        writeln!(
                            s,
                            "{pad}    root{name} {} [{}]{}",
                            r.path.display(),
                            flags(&a),
                            limits(r)
                        )?;
                    }
                }
            }
            FdbConfig::Select { lanes, .. } => {
                writeln!(s, "{pad}select ({} lanes)", lanes.len())?;
                for l in lanes {
                    write!(s, "{pad}  when {}", l.select)?;
                    if !l.excludes.is_empty() {
                        write!(s, " except {}", l.excludes.join(" or "))?;
                    }
                    writeln!(s, ":")?;
                    l.config.describe_into(s, depth + 2)?;
                }
            }
            FdbConfig::Dist { lanes, hash } => {
                writeln!(
                    s,
                    "{pad}dist ({} lanes, hash by {})",
                    lanes.len(),
                    match hash {
                        super::DistHash::Field => "field",
                        super::DistHash::Database => "database",
                    }
                )?;
                for l in lanes {
                    writeln!(s, "{pad}  lane {}:", l.id)?;
                    l.config.describe_into(s, depth + 2)?;
                }
            }
            FdbConfig::Remote {
                host,
                port,
                socket,
                token,
                tls,
            } => {
                let t = if token.is_some() { " (with token)" } else { "" };
                let tls = match tls {
                    Some(t) => match &t.client {
                        None => format!(" over TLS (CA {})", t.ca.display()),
                        Some((cert, _)) => format!(
                            " over TLS (CA {}, client certificate {})",
                            t.ca.display(),
                            cert.display()
                        ),
                    },
                    None => String::new(),
                };
                match socket {
                    Some(p) => writeln!(
                        s,
                        "{pad}remote unix:{} (fields handed over in shared memory){t}",
                        p.display()
                    )?,
                    None => writeln!(s, "{pad}remote {host}:{port}{t}{tls}")?,
                }
            }
            FdbConfig::Mirror { children, quorum } => {
                let q = quorum.map_or("all".into(), |q| q.to_string());
                writeln!(s, "{pad}mirror ({} children, quorum {q})", children.len())?;
                for c in children {
                    c.describe_into(s, depth + 1)?;
                }
            }
            FdbConfig::Filter {
                select,
                excludes,
                children,
            } => {
                write!(s, "{pad}filter select {}", select.as_deref().unwrap_or("*"))?;
                if !excludes.is_empty() {
                    write!(s, " except {}", excludes.join(" or "))?;
                }
                writeln!(s)?;
                for c in children {
                    c.describe_into(s, depth + 1)?;
                }
            }
            FdbConfig::Diagnostics { report, children } => {
                write!(s, "{pad}diagnostics")?;
                if let Some(r) = report {
                    write!(s, ", report to {}", r.display())?;
                }
                writeln!(s)?;
                for c in children {
                    c.describe_into(s, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

fn flags(a: &Actions) -> String {
    let on: Vec<&str> = [
        ("list", a.list),
        ("retrieve", a.retrieve),
        ("archive", a.archive),
        ("wipe", a.wipe),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(n, _)| *n)
    .collect();
    if on.is_empty() {
        "none".into()
    } else {
        on.join(",")
    }
}

impl fmt::Display for FdbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A root's tier limits as ` (capacity 10GiB, max_fill 90%, max_age 30d)`, or nothing.
pub fn limits(r: &Root) -> String {
    let mut parts = Vec::new();
    if let Some(c) = r.capacity {
        parts.push(format!("capacity {}", human_bytes(c)));
    }
    if let Some(f) = r.max_fill {
        parts.push(format!("max_fill {f}%"));
    }
    if let Some(d) = r.max_age_days {
        parts.push(format!("max_age {d}d"));
    }
    if r.format == Some(super::DbFormat::Fdb5) {
        parts.push("new databases in FDB5's format".into());
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// Bytes in binary units, exact when they divide evenly (`512KiB`), else one decimal.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut v = b as f64;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v}{}", UNITS[unit])
    } else {
        format!("{v:.1}{}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::super::from_yaml_str_with;
    use std::path::Path;

    #[test]
    fn outline_of_a_nested_tree() {
        let text = "type: select\nschema: /s\nfdbs:\n\
            - select: class=od\n  excludes: [expver=0099]\n  spaces: [{name: od, roots: [{path: /a, name: r1}, {path: /b, writable: false}]}]\n\
            - select: class=rd\n  type: dist\n  lanes: [{type: remote, host: h, token: t}, {type: mirror, fdbs: [{type: remote, host: m}]}]\n\
            - select: class=ea\n  type: filter\n  excludes: stream=enfo\n  fdbs: [{type: remote, host: f, port: 1}]\n";
        let c = from_yaml_str_with(text, "t", Some(Path::new("/")), &|_| None).unwrap();
        let want = "\
select (3 lanes)
  when class=od except expver=0099:
    local (engine toc, store file), schema: /s
      space od (regex .*, handler Default)
        root r1 /a [list,retrieve,archive,wipe]
        root /b [list,retrieve]
  when class=rd:
    dist (2 lanes, hash by field)
      lane 0:
        remote h:7654 (with token)
      lane 1:
        mirror (1 children, quorum all)
          remote m:7654
  when class=ea except stream=enfo:
    filter select *
      remote f:1
";
        assert_eq!(c.describe(), want);
        assert_eq!(c.to_string(), want);
        assert_eq!(c.type_name(), "select");
        let l = from_yaml_str_with(
            "visitable: false\nspaces: [{roots: [{path: /a}]}]",
            "t",
            None,
            &|_| None,
        )
        .unwrap();
        assert!(l.describe().starts_with(
            "local (engine toc, store file), schema: built-in default, actions: archive,wipe\n"
        ));
    }

    #[test]
    fn the_s3_section_names_the_bucket_and_server() {
        let c = from_yaml_str_with(
            "engine: s3\ns3: {endpoint: 'http://h:9000', bucket: fdb, prefix: ops}",
            "t",
            None,
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            c.describe(),
            "local (engine s3, store s3), schema: built-in default, s3: s3://fdb/ops/ at http://h:9000\n"
        );
    }
}
