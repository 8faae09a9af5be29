//! The build's protoc fallback: `scripts/protoc` (what `.cargo/config.toml` sets as `PROTOC`
//! for etcd-client's build script) must run the vendored protoc when the machine has none, so
//! that `cargo run --release -p watchkeeper -- serve` builds on a fresh machine.

use std::path::Path;
use std::process::Command;

fn version(mut command: Command) -> String {
    let output = command.arg("--version").output().expect("protoc runs");
    assert!(
        output.status.success(),
        "protoc --version failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 version")
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn vendored() -> std::path::PathBuf {
    protoc_bin_vendored_linux_x86_64::protoc_bin_path()
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn vendored() -> std::path::PathBuf {
    protoc_bin_vendored_linux_aarch_64::protoc_bin_path()
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn the_protoc_wrapper_runs_the_vendored_binary_without_a_protoc_on_path() {
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/protoc");
    // An empty PATH: no protoc of the machine's can be found, as on a fresh machine.
    let empty = tempfile::tempdir().expect("temp dir");
    let mut command = Command::new(&wrapper);
    command.env("PATH", empty.path());
    let through_wrapper = version(command);
    assert!(
        through_wrapper.starts_with("libprotoc "),
        "{through_wrapper}"
    );
    assert_eq!(through_wrapper, version(Command::new(vendored())));
}
