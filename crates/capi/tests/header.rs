//! The committed C header is exactly what cbindgen generates from this crate, so it can never
//! drift from the Rust code. Regenerate with `XSCHED_BLESS=1 cargo test -p xsched-capi --test header`.

use std::path::Path;

#[test]
fn header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("header generates")
        .write(&mut generated);
    let path = crate_dir.join("include/xsched.h");
    if std::env::var_os("XSCHED_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/xsched.h is stale: run `XSCHED_BLESS=1 cargo test -p xsched-capi --test header`"
    );
}
