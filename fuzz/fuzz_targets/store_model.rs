#![no_main]
//! Random operations by three writers over the simulated file system, with injected EIO,
//! ENOSPC and crashes, checked against an in-memory model. The driver is the one the
//! `model_fuzz` proptest runs (crates/fieldstore/tests/support/), included here by path.

#[path = "../../crates/fieldstore/tests/support/store_model.rs"]
mod store_model;

#[path = "../../crates/fieldstore/tests/support/model_driver.rs"]
mod model_driver;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = model_driver::run(&model_driver::decode(data, 200)) {
        panic!("{e}");
    }
});
