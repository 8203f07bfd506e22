//! The retrieve stream's reads and seeks across field boundaries.

use super::*;
use crate::api::reader::FieldSpan;
use std::io::{Seek, SeekFrom};

const ALL: &str = "class=od,expver=0001,stream=enfo,date=20261122,time=1200,type=pf,levtype=pl,levelist=1000/500,param=130/131,step=0/6/12,number=1/2";

/// 24 fields of different contents in one database.
fn filled(dir: &std::path::Path) -> LocalFdb {
    let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
    let crate::model::config::FdbConfig::Local(l) =
        crate::model::config::from_yaml_str(&yaml, "test").unwrap()
    else {
        panic!("not a local config")
    };
    let f = LocalFdb::new(l).unwrap();
    for (i, step) in ["0", "6", "12"].iter().enumerate() {
        for number in ["1", "2"] {
            for level in ["1000", "500"] {
                for param in ["130", "131"] {
                    let keys = [
                        ("class", "od"),
                        ("stream", "enfo"),
                        ("type", "pf"),
                        ("expver", "0001"),
                        ("date", "20261122"),
                        ("time", "1200"),
                        ("step", *step),
                        ("levtype", "pl"),
                        ("levelist", level),
                        ("param", param),
                        ("number", number),
                    ];
                    let msg = grib::sample::make_field(&keys, 100 + i * 50, 1).unwrap();
                    f.archive(None, &msg).unwrap();
                }
            }
        }
    }
    f.flush().unwrap();
    f
}

fn request(s: &str) -> Request {
    crate::model::request::parse_request(s).unwrap()
}

#[test]
fn streams_outlive_the_handle_and_seek_to_any_field() {
    let d = tempfile::tempdir().unwrap();
    let f = filled(d.path());
    let mut whole = Vec::new();
    f.retrieve(&request(ALL))
        .unwrap()
        .read_to_end(&mut whole)
        .unwrap();
    let mut r = f.retrieve(&request(ALL)).unwrap();
    let list = f.list(&request(ALL), ListOptions::default()).unwrap();
    drop(f);
    assert_eq!(list.count(), 24);
    assert_eq!(r.fields().len(), 24);
    assert_eq!(r.size(), whole.len() as u64);
    assert_eq!(r.fields().iter().map(|s| s.length).sum::<u64>(), r.size());
    // Backwards through the fields, each read whole (and so verified) from its boundary.
    let spans: Vec<FieldSpan> = r.fields().to_vec();
    for s in spans.iter().rev() {
        assert_eq!(r.seek(SeekFrom::Start(s.offset)).unwrap(), s.offset);
        let mut one = vec![0u8; s.length as usize];
        r.read_exact(&mut one).unwrap();
        assert_eq!(
            one,
            whole[s.offset as usize..(s.offset + s.length) as usize]
        );
        assert_eq!(r.tell(), s.offset + s.length);
        assert!(one.starts_with(b"GRIB"));
    }
    // From inside a field to the end.
    let mid = spans[3].offset + 7;
    r.seek(SeekFrom::Start(mid)).unwrap();
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, whole[mid as usize..]);
    assert_eq!(r.seek(SeekFrom::End(0)).unwrap(), r.size());
    assert_eq!(r.read(&mut [0u8; 8]).unwrap(), 0);
    assert!(r.seek(SeekFrom::Current(-(r.size() as i64) - 1)).is_err());
}

#[test]
fn copying_into_a_file_gives_the_bytes_a_read_gives() {
    let d = tempfile::tempdir().unwrap();
    let f = filled(d.path());
    let mut whole = Vec::new();
    f.retrieve(&request(ALL))
        .unwrap()
        .read_to_end(&mut whole)
        .unwrap();
    for start in [0u64, 5, whole.len() as u64 / 2] {
        let mut r = f.retrieve(&request(ALL)).unwrap();
        r.seek(SeekFrom::Start(start)).unwrap();
        let mut out = tempfile::tempfile().unwrap();
        let n = r.copy_to_file(&mut out).unwrap();
        assert_eq!(n, whole.len() as u64 - start);
        assert_eq!(r.tell(), r.size());
        out.seek(SeekFrom::Start(0)).unwrap();
        let mut back = Vec::new();
        out.read_to_end(&mut back).unwrap();
        assert_eq!(back, whole[start as usize..]);
    }
}

/// Damage before the position a read starts from is still found: the field's head is read
/// for its checksum. Copying into a file checks every field too.
#[test]
fn damage_is_found_whichever_position_reading_starts_from() {
    let d = tempfile::tempdir().unwrap();
    let f = filled(d.path());
    let one = "class=od,expver=0001,stream=enfo,date=20261122,time=1200,type=pf,levtype=pl,levelist=500,param=131,step=6,number=2";
    let el = f
        .list(&request(one), ListOptions::default())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let loc = el.location.unwrap();
    let path = loc.uri.trim_start_matches("file://").to_string();
    let mut data = std::fs::read(&path).unwrap();
    data[loc.offset as usize + 20] ^= 0xff;
    std::fs::write(&path, &data).unwrap();
    let mut r = f.retrieve(&request(one)).unwrap();
    r.seek(SeekFrom::Start(40)).unwrap();
    let e = r.read_to_end(&mut Vec::new()).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    let mut r = f.retrieve(&request(one)).unwrap();
    let e = r
        .copy_to_file(&mut tempfile::tempfile().unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    // The undamaged fields still read.
    let other = one.replace("param=131", "param=130");
    let mut r = f.retrieve(&request(&other)).unwrap();
    r.seek(SeekFrom::Start(40)).unwrap();
    r.read_to_end(&mut Vec::new()).unwrap();
}
