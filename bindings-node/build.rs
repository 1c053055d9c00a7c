//! Sets the linker flags a Node-API module needs.
fn main() {
    napi_build::setup();
}
