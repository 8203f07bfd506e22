//! Real GRIB2 fields made with ecCodes, carrying the MARS keys asked for: for the demo, tests and
//! benchmarks.

use super::error::GribError;
use super::handle::Handle;

/// Makes one GRIB2 message with the given MARS keys (`class`, `stream`, `type`, `expver`, `date`,
/// `time`, `step`, `levtype`, `levelist`, `param`, `number`, ...) and about `npoints` values of a
/// deterministic pseudo-random field (16-bit packing: about 2 bytes a point).
pub fn make_field(keys: &[(&str, &str)], npoints: usize, seed: u64) -> Result<Vec<u8>, GribError> {
    FieldMaker::new(keys, npoints, seed)?.message()
}

/// As [`make_field`], on a global regular lat/lon grid of `ni` x `nj` points (poles included:
/// 3600 x 1801 is the 0.1 degree grid), with smooth values (warm at the equator, waves along
/// the longitudes) and a little noise, so a map of it shows its shape.
pub fn make_global_field(
    keys: &[(&str, &str)],
    ni: usize,
    nj: usize,
    seed: u64,
) -> Result<Vec<u8>, GribError> {
    FieldMaker::global(keys, ni, nj, seed)?.message()
}

/// The most grid points a made field has: 2^24 (finer than 0.1 degree global grids), 128 MiB of
/// values while it is encoded. More is refused before anything is allocated: `--points 1e11`
/// aborted the process when the allocation failed.
pub const MAX_POINTS: usize = 1 << 24;

/// A field kept open in ecCodes so that variants differing in a few header keys (step, member)
/// cost a key update rather than a new encoding: what a load generator needs per field.
pub struct FieldMaker {
    handle: Handle<'static>,
}

impl FieldMaker {
    /// A field as `make_field` makes it.
    pub fn new(keys: &[(&str, &str)], npoints: usize, seed: u64) -> Result<FieldMaker, GribError> {
        if npoints > MAX_POINTS {
            return Err(GribError::TooManyPoints {
                asked: npoints,
                max: MAX_POINTS,
            });
        }
        let mut h = Handle::from_sample("GRIB2")?;
        h.set_long("setLocalDefinition", 1)?;
        h.set_long("localDefinitionNumber", 1)?;
        let get = |k: &str| keys.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        if get("number").is_some() {
            // Ensemble members need the ensemble product template before `number` exists.
            h.set_long("productDefinitionTemplateNumber", 1)?;
        }
        let ni = (npoints.max(1) as f64).sqrt().ceil() as usize;
        let nj = npoints.max(1).div_ceil(ni);
        h.set_long("Ni", ni as i64)?;
        h.set_long("Nj", nj as i64)?;
        // A consistent regular grid (the sample's corners and increments are for 16 x 31):
        // global in longitude, centred on the equator, in whole millidegrees.
        let (ni, nj) = (ni as i64, nj as i64);
        let inc_i = (360_000_000 / ni) / 1000 * 1000;
        let inc_j = (180_000_000 / nj.max(2)) / 1000 * 1000;
        let lat_first = ((nj - 1) * inc_j / 2) / 1000 * 1000;
        for (k, v) in [
            ("iDirectionIncrement", inc_i),
            ("jDirectionIncrement", inc_j),
            ("latitudeOfFirstGridPoint", lat_first),
            ("latitudeOfLastGridPoint", lat_first - (nj - 1) * inc_j),
            ("longitudeOfFirstGridPoint", 0),
            ("longitudeOfLastGridPoint", (ni - 1) * inc_i),
        ] {
            h.set_long(k, v)?;
        }
        let (ni, nj) = (ni as usize, nj as usize);
        h.set_long("bitsPerValue", 16)?;
        let mut maker = FieldMaker { handle: h };
        maker.set_keys(keys)?;
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let values: Vec<f64> = (0..ni * nj)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                200.0 + (x % 10_000) as f64 / 100.0
            })
            .collect();
        maker.handle.set_doubles("values", &values)?;
        Ok(maker)
    }

    /// A field as [`make_global_field`] makes it.
    pub fn global(
        keys: &[(&str, &str)],
        ni: usize,
        nj: usize,
        seed: u64,
    ) -> Result<FieldMaker, GribError> {
        let n = ni.saturating_mul(nj);
        if n > MAX_POINTS || ni < 2 || nj < 2 {
            return Err(GribError::TooManyPoints {
                asked: n,
                max: MAX_POINTS,
            });
        }
        let mut maker = FieldMaker::new(keys, 1, seed)?;
        let h = &mut maker.handle;
        h.set_long("Ni", ni as i64)?;
        h.set_long("Nj", nj as i64)?;
        let inc_i = 360_000_000 / ni as i64;
        let inc_j = 180_000_000 / (nj as i64 - 1);
        for (k, v) in [
            ("iDirectionIncrement", inc_i),
            ("jDirectionIncrement", inc_j),
            ("latitudeOfFirstGridPoint", 90_000_000),
            (
                "latitudeOfLastGridPoint",
                90_000_000 - (nj as i64 - 1) * inc_j,
            ),
            ("longitudeOfFirstGridPoint", 0),
            ("longitudeOfLastGridPoint", (ni as i64 - 1) * inc_i),
        ] {
            h.set_long(k, v)?;
        }
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut values = Vec::with_capacity(n);
        for j in 0..nj {
            let lat = (90.0 - j as f64 * inc_j as f64 / 1e6).to_radians();
            for i in 0..ni {
                let lon = (i as f64 * inc_i as f64 / 1e6).to_radians();
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let noise = (x % 1000) as f64 / 1000.0;
                values.push(
                    230.0
                        + 70.0 * lat.cos()
                        + 6.0 * (3.0 * lon + seed as f64).sin() * lat.cos()
                        + noise,
                );
            }
        }
        maker.handle.set_doubles("values", &values)?;
        Ok(maker)
    }

    /// Changes header keys (values stay).
    pub fn set_keys(&mut self, keys: &[(&str, &str)]) -> Result<(), GribError> {
        let h = &mut self.handle;
        for (k, v) in keys {
            let long = |v: &str| {
                v.parse::<i64>()
                    .map_err(|_| GribError::EcCodes(format!("{k}={v}: expected an integer")))
            };
            match *k {
                "date" | "time" | "step" | "number" => h.set_long(k, long(v)?)?,
                "param" => h.set_long("paramId", long(v)?)?,
                "levelist" => h.set_long("level", long(v)?)?,
                "levtype" => match *v {
                    "sfc" => h.set_long("typeOfFirstFixedSurface", 1)?,
                    "ml" => h.set_long("typeOfFirstFixedSurface", 105)?,
                    // eccodeslib 2.43 (PyPI's newest for Python 3.9) has `levtype` read-only
                    // in the GRIB2 sample: an isobaric surface is then set directly.
                    "pl" => {
                        if h.set_string("levtype", "pl").is_err() {
                            h.set_long("typeOfFirstFixedSurface", 100)?;
                        }
                    }
                    other => h.set_string("levtype", other)?,
                },
                "domain" => {}
                _ => h.set_string(k, v)?,
            }
        }
        Ok(())
    }

    /// The encoded message as it stands.
    pub fn message(&self) -> Result<Vec<u8>, GribError> {
        self.handle.message()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::{mars_keys, split_slice};

    #[test]
    fn fields_carry_their_keys() {
        let keys = [
            ("class", "od"),
            ("stream", "enfo"),
            ("type", "pf"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", "6"),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
            ("number", "3"),
        ];
        let msg = make_field(&keys, 1000, 1).unwrap();
        assert!(msg.len() > 2000 && msg.len() < 4000, "{}", msg.len());
        let (_, _, framed) = split_slice(&msg, "t").unwrap()[0];
        let k = mars_keys(framed).unwrap();
        for (n, v) in keys {
            assert_eq!(k.get(n), Some(v), "{n} in {k}");
        }
        let sfc = make_field(
            &[
                ("class", "od"),
                ("stream", "oper"),
                ("type", "fc"),
                ("expver", "0001"),
                ("date", "20261122"),
                ("time", "0"),
                ("step", "0"),
                ("levtype", "sfc"),
                ("param", "167"),
            ],
            100,
            2,
        )
        .unwrap();
        let k = mars_keys(&sfc).unwrap();
        assert_eq!(k.get("levtype"), Some("sfc"));
        // The grid's corners and increments agree (ecCodes derives the points from them).
        let d = crate::grib::Decoded::new(&sfc).unwrap();
        let (lat, lon) = (d.latitudes().unwrap(), d.longitudes().unwrap());
        assert_eq!(lat.len(), 100);
        assert_eq!((lat[0], lon[0], lon[1]), (81.0, 0.0, 36.0));
        assert_eq!((lat[10], lat[99], lon[99]), (63.0, -81.0, 324.0));
        assert_eq!(
            d.get("iDirectionIncrementInDegrees").unwrap(),
            Some(crate::grib::KeyValue::Double(36.0))
        );
        assert_eq!(k.get("levelist"), None);
        assert_eq!(k.get("time"), Some("0000"));
    }

    /// Regression: `fieldstore sample --points 100000000000` aborted the process (SIGABRT) when
    /// allocating the values failed.
    #[test]
    fn a_point_count_beyond_memory_is_an_error_not_an_abort() {
        let keys = [("param", "130"), ("levelist", "500")];
        for n in [MAX_POINTS + 1, 100_000_000_000, usize::MAX] {
            match make_field(&keys, n, 1) {
                Err(GribError::TooManyPoints { asked, max }) => {
                    assert_eq!((asked, max), (n, MAX_POINTS))
                }
                Err(other) => panic!("{n}: {other}"),
                Ok(_) => panic!("{n}: made a field"),
            }
        }
        assert!(make_field(&keys, 0, 1).is_ok());
    }

    #[test]
    fn keys_extract_concurrently() {
        let msg = make_field(
            &[
                ("class", "od"),
                ("stream", "oper"),
                ("type", "fc"),
                ("expver", "0001"),
                ("date", "20261122"),
                ("time", "1200"),
                ("step", "6"),
                ("levtype", "pl"),
                ("levelist", "850"),
                ("param", "131"),
            ],
            500,
            3,
        )
        .unwrap();
        let expect = mars_keys(&msg).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..50 {
                        assert_eq!(mars_keys(&msg).unwrap(), expect);
                    }
                });
            }
        });
    }
}
