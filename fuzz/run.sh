#!/usr/bin/env bash
# Runs one fuzz target for a fixed time on one core, from its committed seeds.
#
# Usage: fuzz/run.sh TARGET [SECONDS]   (default 300)
# New inputs go to fuzz/corpus/TARGET (not committed), crashes to fuzz/artifacts/TARGET.
# Needs cargo-fuzz (`cargo install cargo-fuzz`). The toolchain here is stable only, so
# RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its nightly flags; without a sanitizer (`-s none`),
# which is what runs on stable (Rust code here has no `unsafe`, so ASan adds little).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET [SECONDS]}
seconds=${2:-300}
mkdir -p "corpus/$target"
RUSTC_BOOTSTRAP=1 exec cargo fuzz run -s none --target-dir "${CARGO_TARGET_DIR:-target}" \
  "$target" "corpus/$target" "seeds/$target" -- \
  -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
