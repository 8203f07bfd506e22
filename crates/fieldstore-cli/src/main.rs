fn main() {
    println!("fieldstore {}", env!("CARGO_PKG_VERSION"));
}
