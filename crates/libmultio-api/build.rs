//! Gives the shared library the soname a program linked with `-lmultio-api` records (MultIO's
//! own library records `libmultio-api.so`), so the same program finds either library by
//! LD_LIBRARY_PATH alone.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmultio-api.so");
    println!("cargo:rerun-if-changed=build.rs");
}
