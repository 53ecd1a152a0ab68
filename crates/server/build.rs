//! Builds the C side of number parsing and INCRBYFLOAT (`src/types/numbers.c`).

fn main() {
    println!("cargo:rerun-if-changed=src/types/numbers.c");
    cc::Build::new()
        .file("src/types/numbers.c")
        .warnings(true)
        .compile("shale_numbers");
}
