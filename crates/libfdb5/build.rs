//! Gives the shared library the soname a program linked with `-lfdb5` records, so that it is
//! found again at run time by name (LD_LIBRARY_PATH), as upstream's libfdb5.so is.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfdb5.so");
    println!("cargo:rerun-if-changed=build.rs");
}
