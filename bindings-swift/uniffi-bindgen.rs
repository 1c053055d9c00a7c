//! uniffi's binding generator (`generate --library <lib> --language swift|python|kotlin`).
fn main() {
    uniffi::uniffi_bindgen_main();
}
