//! Links ecCodes, the system library that reads GRIB metadata (Debian: `libeccodes-dev`).

fn main() {
    println!("cargo:rerun-if-env-changed=ECCODES_DIR");
    if let Ok(dir) = std::env::var("ECCODES_DIR") {
        println!("cargo:rustc-link-search=native={dir}/lib");
        println!("cargo:rustc-link-lib=dylib=eccodes");
        return;
    }
    if pkg_config::Config::new()
        .atleast_version("2.20")
        .probe("eccodes")
        .is_err()
    {
        println!(
            "cargo:warning=pkg-config could not find eccodes; linking -leccodes anyway \
             (install libeccodes-dev, or set ECCODES_DIR)"
        );
        println!("cargo:rustc-link-lib=dylib=eccodes");
    }
}
