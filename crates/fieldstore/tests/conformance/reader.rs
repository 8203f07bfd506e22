//! The retrieve reader: its size is known before the first byte and equals what list reports,
//! it seeks to any field boundary and reads that field, and it outlives the handle.

use std::io::{Read, Seek, SeekFrom};

use crate::data::{archive_all, bytes, grid, retrieve_request};
use crate::harness::Env;
use crate::ops::{list, retrieve_all};

crate::cases!(
    the_size_is_the_sum_of_the_listed_lengths,
    seeking_to_each_field_boundary_reads_that_field,
    streams_go_on_after_the_handle_is_dropped,
);

fn everything_in_the_grid() -> fieldstore::model::request::Request {
    retrieve_request("20261122/20261123", "fc/an", "0/6/12", "130/131")
}

fn the_size_is_the_sum_of_the_listed_lengths(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let req = everything_in_the_grid();
    let listed: u64 = list(fdb.as_ref(), &req, 3, false)
        .expect("list")
        .iter()
        .map(|e| e.location.as_ref().expect("a field's location").length)
        .sum();
    let r = fdb.retrieve(&req).expect("retrieve");
    assert_eq!(r.fields().len(), grid().len(), "one span per field");
    assert_eq!(r.size(), listed, "size against the listed lengths");
    assert_eq!(r.fields().iter().map(|f| f.length).sum::<u64>(), r.size());
    assert_eq!(r.tell(), 0);
    let whole = retrieve_all(fdb.as_ref(), &req).expect("retrieve");
    assert_eq!(whole.len() as u64, r.size(), "size against the bytes read");
}

fn seeking_to_each_field_boundary_reads_that_field(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let req = everything_in_the_grid();
    let whole = retrieve_all(fdb.as_ref(), &req).expect("retrieve");
    let mut r = fdb.retrieve(&req).expect("retrieve");
    let spans = r.fields().to_vec();
    // Every other field, skipping the ones between: forward seeks every reader can do.
    for s in spans.iter().step_by(2) {
        assert_eq!(r.seek(SeekFrom::Start(s.offset)).expect("seek"), s.offset);
        let mut one = vec![0u8; s.length as usize];
        r.read_exact(&mut one).expect("read one field");
        assert_eq!(
            one,
            whole[s.offset as usize..(s.offset + s.length) as usize],
            "the field at {}",
            s.offset
        );
        // The span's key is the key the bytes were archived under.
        let key = s.key.db.join(&s.key.index).join(&s.key.datum);
        let archived = grid()
            .into_iter()
            .find(|k| k.sorted() == key.sorted())
            .unwrap_or_else(|| panic!("span key {key} is none of the archived keys"));
        assert_eq!(one, bytes(&archived, 1), "the bytes of {key}");
        assert_eq!(r.tell(), s.offset + s.length);
    }
    // Backwards: from the last field to the first.
    r.seek(SeekFrom::Start(spans[0].offset)).expect("seek back");
    for s in spans.iter().rev() {
        r.seek(SeekFrom::Start(s.offset)).expect("seek");
        let mut one = vec![0u8; s.length as usize];
        r.read_exact(&mut one).expect("read one field");
        assert_eq!(
            one,
            whole[s.offset as usize..(s.offset + s.length) as usize]
        );
    }
    assert_eq!(r.seek(SeekFrom::End(0)).expect("seek to the end"), r.size());
    assert_eq!(r.read(&mut [0u8; 16]).expect("read at the end"), 0);
}

fn streams_go_on_after_the_handle_is_dropped(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let req = everything_in_the_grid();
    let whole = retrieve_all(fdb.as_ref(), &req).expect("retrieve");
    let mut r = fdb.retrieve(&req).expect("retrieve");
    let listing = fdb
        .list(&req, fieldstore::api::ListOptions::default())
        .expect("list");
    drop(fdb);
    let mut got = Vec::new();
    r.read_to_end(&mut got)
        .expect("read after the handle is gone");
    assert!(got == whole, "the bytes read after the handle is gone");
    // Going back after the handle is gone (a remote reader sends its retrieve again).
    r.rewind().expect("rewind after the handle is gone");
    let mut again = Vec::new();
    r.read_to_end(&mut again)
        .expect("read again after rewinding");
    assert!(again == whole, "the bytes read again after rewinding");
    let mut n = 0;
    for e in listing {
        e.expect("an element after the handle is gone");
        n += 1;
    }
    assert_eq!(n, grid().len());
}
