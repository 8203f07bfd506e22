//! The forecast the hammer imitates: which fields exist (members × steps × levels × params), how they
//! are shared between processes, their keys and requests, and their bytes.

use anyhow::{bail, Context as _, Result};
use std::cell::RefCell;

use fieldstore::grib::sample::FieldMaker;
use fieldstore::model::request::{parse_request, Request};
use fieldstore::model::Key;

/// The 37 standard pressure levels (hPa), surface first as a forecast writes them.
const PRESSURE_LEVELS: [u32; 37] = [
    1000, 975, 950, 925, 900, 875, 850, 825, 800, 775, 750, 700, 650, 600, 550, 500, 450, 400, 350,
    300, 250, 225, 200, 175, 150, 125, 100, 70, 50, 30, 20, 10, 7, 5, 3, 2, 1,
];
/// Upper-air parameters (t, u, v, q, w, vo, d, z, r, cc, o3, crwc, cswc, clwc, ciwc, pv).
const UPPER_PARAMS: [u32; 16] = [
    130, 131, 132, 133, 135, 138, 155, 129, 157, 248, 203, 75, 76, 246, 247, 60,
];
/// Surface parameters (2t, 10u, 10v, msl, sp, tp, tcc, 2d, skt, ci, sst, sd, lsp, cp, ssrd, strd).
const SURFACE_PARAMS: [u32; 16] = [
    167, 165, 166, 151, 134, 228, 164, 168, 235, 31, 34, 141, 142, 143, 169, 175,
];
/// Model levels of ECMWF's 137-level grid.
const MODEL_LEVELS: u32 = 137;

/// What one field is, within the forecast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldId {
    pub member: Option<u32>,
    pub step: u32,
    /// Index into the level list (0 for surface fields).
    pub level: u32,
    /// Index into the parameter list.
    pub param: u32,
}

#[derive(Debug, Clone)]
pub struct Shape {
    pub class: String,
    pub expver: String,
    pub date: String,
    pub time: String,
    /// 0: a deterministic forecast (stream oper, type fc); N: members first_member.. (enfo, pf).
    pub members: u32,
    pub first_member: u32,
    pub steps: u32,
    pub step_interval: u32,
    pub levels: u32,
    pub levtype: String,
    pub params: u32,
    pub points: usize,
}

impl Shape {
    pub fn check(&self) -> Result<()> {
        let (max_levels, max_params) = match self.levtype.as_str() {
            "pl" => (PRESSURE_LEVELS.len() as u32, UPPER_PARAMS.len() as u32),
            "ml" => (MODEL_LEVELS, UPPER_PARAMS.len() as u32),
            "sfc" => (1, SURFACE_PARAMS.len() as u32),
            other => bail!("--levtype {other}: expected pl, ml or sfc"),
        };
        if self.levels == 0 || self.levels > max_levels {
            bail!(
                "--levels {}: levtype {} has 1 to {max_levels}{}",
                self.levels,
                self.levtype,
                if self.levtype == "pl" {
                    " (use --levtype ml for up to 137)"
                } else {
                    ""
                }
            );
        }
        if self.params == 0 || self.params > max_params {
            bail!(
                "--params {}: the hammer knows {max_params} real parameters for levtype {}",
                self.params,
                self.levtype
            );
        }
        if self.steps == 0 {
            bail!("--steps must be at least 1");
        }
        if self.expver.chars().count() != 4 {
            bail!(
                "--expver {}: GRIB needs exactly 4 characters (e.g. 0001, hmmr)",
                self.expver
            );
        }
        if self.points < 16 {
            bail!("--points must be at least 16 (each field carries a 20-byte stamp in its data)");
        }
        Ok(())
    }

    fn member_count(&self) -> u32 {
        self.members.max(1)
    }

    /// Fields written at each step (all members, levels and params).
    pub fn per_step(&self) -> u64 {
        u64::from(self.member_count()) * u64::from(self.levels) * u64::from(self.params)
    }

    pub fn total(&self) -> u64 {
        self.per_step() * u64::from(self.steps)
    }

    /// The `j`-th field of a step, in the order an I/O server writes it: member, level, param.
    pub fn field(&self, step: u32, j: u64) -> FieldId {
        let params = u64::from(self.params);
        let levels = u64::from(self.levels);
        FieldId {
            member: (self.members > 0).then(|| self.first_member + (j / (params * levels)) as u32),
            step,
            level: ((j / params) % levels) as u32,
            param: (j % params) as u32,
        }
    }

    /// The fields of `step` that process `index` of `of` handles: a contiguous share, as I/O
    /// servers split a step's output.
    pub fn share(&self, step: u32, index: usize, of: usize) -> impl Iterator<Item = FieldId> + '_ {
        let n = self.per_step();
        let (i, of) = (index as u64, of.max(1) as u64);
        (n * i / of..n * (i + 1) / of).map(move |j| self.field(step, j))
    }

    /// Every field, step by step.
    pub fn all(&self) -> impl Iterator<Item = FieldId> + '_ {
        (0..self.steps).flat_map(move |s| (0..self.per_step()).map(move |j| self.field(s, j)))
    }

    fn level_value(&self, level: u32) -> Option<u32> {
        match self.levtype.as_str() {
            "pl" => PRESSURE_LEVELS.get(level as usize).copied(),
            "ml" => Some(level + 1),
            _ => None,
        }
    }

    fn param_value(&self, param: u32) -> u32 {
        let table: &[u32] = if self.levtype == "sfc" {
            &SURFACE_PARAMS
        } else {
            &UPPER_PARAMS
        };
        table[param as usize % table.len()]
    }

    /// The field's MARS keys, as `keyword=value` pairs in schema order.
    fn pairs(&self, f: &FieldId) -> Vec<(&'static str, String)> {
        let (stream, ty) = if self.members > 0 {
            ("enfo", "pf")
        } else {
            ("oper", "fc")
        };
        let mut pairs = vec![
            ("class", self.class.clone()),
            ("expver", self.expver.clone()),
            ("stream", stream.to_string()),
            ("date", self.date.clone()),
            ("time", self.time.clone()),
            ("domain", "g".to_string()),
            ("type", ty.to_string()),
            ("levtype", self.levtype.clone()),
            ("step", (f.step * self.step_interval).to_string()),
        ];
        if let Some(m) = f.member {
            pairs.push(("number", m.to_string()));
        }
        if let Some(l) = self.level_value(f.level) {
            pairs.push(("levelist", l.to_string()));
        }
        pairs.push(("param", self.param_value(f.param).to_string()));
        pairs
    }

    pub fn key(&self, f: &FieldId) -> Key {
        Key::from_pairs(self.pairs(f))
    }

    pub fn key_text(&self, f: &FieldId) -> String {
        self.pairs(f)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The request that retrieves exactly this field.
    pub fn request(&self, f: &FieldId) -> Result<Request> {
        let text = format!("retrieve,{}", self.key_text(f));
        parse_request(&text).with_context(|| format!("building the request {text}"))
    }

    /// The request naming every field of one step.
    pub fn step_request(&self, step: u32) -> Result<Request> {
        let f = self.field(step, 0);
        let mut pairs = self.pairs(&f);
        pairs.retain(|(k, _)| !matches!(*k, "number" | "levelist" | "param"));
        let mut text = String::from("list");
        for (k, v) in &pairs {
            text.push_str(&format!(",{k}={v}"));
        }
        if self.members > 0 {
            let last = self.first_member + self.members - 1;
            text.push_str(&format!(",number={}/to/{last}", self.first_member));
        }
        let levels: Vec<String> = (0..self.levels)
            .filter_map(|l| self.level_value(l).map(|v| v.to_string()))
            .collect();
        if !levels.is_empty() {
            text.push_str(&format!(",levelist={}", levels.join("/")));
        }
        let params: Vec<String> = (0..self.params)
            .map(|p| self.param_value(p).to_string())
            .collect();
        text.push_str(&format!(",param={}", params.join("/")));
        parse_request(&text).with_context(|| format!("building the request {text}"))
    }
}

/// Marks the 20 bytes before a GRIB message's end section: the key's checksum, who wrote it and
/// which version, so a read can prove it got the right field, whole.
const STAMP_MAGIC: &[u8; 4] = b"FSHM";
const STAMP_LEN: usize = 20;

/// One real GRIB field per (level, param), encoded once with ecCodes; each archived field is that
/// field with its own step and member set in the header (a key update, not a new encoding) and a
/// stamp in its data section, so the hammer measures the store more than the encoder, and every
/// message carries the keys it is archived under.
pub struct Payloads {
    makers: Vec<RefCell<FieldMaker>>,
    lengths: Vec<usize>,
    params: u32,
    shape: Shape,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub key_crc: u32,
    pub writer: u32,
    pub version: u64,
}

impl Payloads {
    pub fn new(shape: &Shape) -> Result<Payloads> {
        let (mut makers, mut lengths) = (Vec::new(), Vec::new());
        for level in 0..shape.levels {
            for param in 0..shape.params {
                let f = FieldId {
                    member: (shape.members > 0).then_some(shape.first_member),
                    step: 0,
                    level,
                    param,
                };
                let pairs = shape.pairs(&f);
                let refs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let what = || format!("making a template field with ecCodes ({pairs:?})");
                let maker = FieldMaker::new(&refs, shape.points, u64::from(level * 1000 + param))
                    .with_context(what)?;
                let bytes = maker.message().with_context(what)?;
                if bytes.len() < STAMP_LEN + 32 || !bytes.ends_with(b"7777") {
                    bail!(
                        "ecCodes made a {}-byte message: too small to stamp",
                        bytes.len()
                    );
                }
                lengths.push(bytes.len());
                makers.push(RefCell::new(maker));
            }
        }
        Ok(Payloads {
            makers,
            lengths,
            params: shape.params,
            shape: shape.clone(),
        })
    }

    fn slot(&self, f: &FieldId) -> usize {
        (f.level * self.params + f.param) as usize
    }

    pub fn len(&self, f: &FieldId) -> usize {
        self.lengths[self.slot(f)]
    }

    /// The field's bytes into `buf`.
    pub fn fill(&self, f: &FieldId, stamp: Stamp, buf: &mut Vec<u8>) -> Result<()> {
        let mut maker = self.makers[self.slot(f)].borrow_mut();
        let step = (f.step * self.shape.step_interval).to_string();
        let member = f.member.map(|m| m.to_string());
        let mut keys = vec![("step", step.as_str())];
        if let Some(m) = &member {
            keys.push(("number", m.as_str()));
        }
        maker
            .set_keys(&keys)
            .with_context(|| format!("setting {keys:?} with ecCodes"))?;
        *buf = maker.message().context("encoding a field with ecCodes")?;
        if buf.len() != self.len(f) {
            bail!("ecCodes changed the field's length when setting {keys:?}");
        }
        let at = buf.len() - 4 - STAMP_LEN;
        let s = &mut buf[at..at + STAMP_LEN];
        s[..4].copy_from_slice(STAMP_MAGIC);
        s[4..8].copy_from_slice(&stamp.key_crc.to_le_bytes());
        s[8..12].copy_from_slice(&stamp.writer.to_le_bytes());
        s[12..20].copy_from_slice(&stamp.version.to_le_bytes());
        Ok(())
    }

    /// The stamp of bytes read back for `f`, or why they are not a whole, stamped copy of it.
    pub fn check(&self, f: &FieldId, bytes: &[u8]) -> std::result::Result<Stamp, String> {
        let want = self.len(f);
        if bytes.len() != want {
            return Err(format!("{} bytes, expected {want}", bytes.len()));
        }
        let at = bytes.len() - 4 - STAMP_LEN;
        let s = &bytes[at..at + STAMP_LEN];
        if &s[..4] != STAMP_MAGIC || !bytes.ends_with(b"7777") || !bytes.starts_with(b"GRIB") {
            return Err("not a field written by the hammer".into());
        }
        let word = |r: std::ops::Range<usize>| {
            s[r].iter()
                .rev()
                .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
        };
        Ok(Stamp {
            key_crc: word(4..8) as u32,
            writer: word(8..12) as u32,
            version: word(12..20),
        })
    }
}

pub fn key_crc(shape: &Shape, f: &FieldId) -> u32 {
    fieldstore::checksum::crc32c(shape.key_text(f).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(members: u32) -> Shape {
        Shape {
            class: "od".into(),
            expver: "hmmr".into(),
            date: "20261122".into(),
            time: "1200".into(),
            members,
            first_member: 1,
            steps: 3,
            step_interval: 6,
            levels: 4,
            levtype: "pl".into(),
            params: 5,
            points: 64,
        }
    }

    #[test]
    fn shares_cover_each_step_once() {
        let s = shape(3);
        for of in [1, 2, 3, 7] {
            for step in 0..s.steps {
                let mut seen: Vec<FieldId> = (0..of).flat_map(|i| s.share(step, i, of)).collect();
                assert_eq!(seen.len() as u64, s.per_step());
                seen.dedup();
                assert_eq!(seen.len() as u64, s.per_step());
            }
        }
        assert_eq!(s.all().count() as u64, s.total());
        assert_eq!(s.total(), 3 * 3 * 4 * 5);
    }

    #[test]
    fn keys_are_distinct_and_name_members() {
        let s = shape(2);
        let mut keys: Vec<String> = s.all().map(|f| s.key_text(&f)).collect();
        assert!(keys[0].contains("stream=enfo") && keys[0].contains("number=1"));
        assert!(keys[0].contains("step=0") && keys[0].contains("levelist=1000"));
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len() as u64, s.total());
        assert!(shape(0)
            .key_text(&shape(0).field(2, 0))
            .contains("stream=oper,date"));
        assert!(shape(0).key_text(&shape(0).field(2, 0)).contains("step=12"));
    }

    #[test]
    fn shapes_beyond_the_tables_are_refused() {
        let mut s = shape(0);
        s.levels = 38;
        assert!(s.check().unwrap_err().to_string().contains("--levtype ml"));
        s.levtype = "ml".into();
        assert!(s.check().is_ok());
        s.params = 17;
        assert!(s.check().is_err());
    }
}
