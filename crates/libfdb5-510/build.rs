//! Gives the shared library Debian's soname, `libfdb5.so.0d`: a program linked against Debian's
//! libfdb5 records that name, so ours is loaded in its place by LD_LIBRARY_PATH alone.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfdb5.so.0d");
    println!("cargo:rerun-if-changed=build.rs");
}
