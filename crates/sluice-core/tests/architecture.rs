//! Architecture invariant: `sluice-core` does no I/O, so it depends on no runtime, storage or
//! network crate. Adding one must be a deliberate change to this list (see ARCHITECTURE.md).

#[test]
fn core_depends_only_on_pure_crates() {
    let manifest = include_str!("../Cargo.toml");
    let allowed = ["base64", "serde", "serde_json", "sha2", "thiserror"];
    let mut section = "";
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            assert!(allowed.contains(&name), "sluice-core must not depend on {name:?}: it does no I/O");
        }
    }
}
