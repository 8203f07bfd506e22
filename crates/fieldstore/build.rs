//! Nothing to link: ecCodes is opened at run time (src/grib/loader.rs). The script stays so that
//! the build dependencies' feature pins in Cargo.toml keep unifying with the proc-macros'.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
