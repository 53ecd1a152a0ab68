//! Builds the `long double` arithmetic of INCRBYFLOAT (`src/types/long_double.c`).

fn main() {
    println!("cargo:rerun-if-changed=src/types/long_double.c");
    cc::Build::new()
        .file("src/types/long_double.c")
        .warnings(true)
        .compile("shale_long_double");
}
