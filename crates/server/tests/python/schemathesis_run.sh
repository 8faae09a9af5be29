#!/usr/bin/env bash
# Schemathesis against the server's OpenAPI v3 documents (schemathesis_run.py says what runs and
# what counts as a finding). Installs the pinned schemathesis (schemathesis-requirements.txt)
# in a virtualenv under the cargo target directory, kept for the next run.
#
# Usage: WK=target/debug/watchkeeper [SEED=1] [N=10] [GV="api/v1 apis/apps/v1"] \
#          crates/server/tests/python/schemathesis_run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Absolute paths: the driver runs schemathesis from its output directory.
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
target="$(cd "$target" && pwd)"
work="$target/schemathesis"
venv="$work/venv"
requirements="$here/schemathesis-requirements.txt"
stamp="$venv/.installed-$(sha256sum "$requirements" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  touch "$stamp"
fi
export PYTHONDONTWRITEBYTECODE=1
WK="${WK:-$target/debug/watchkeeper}"
case "$WK" in /*) ;; *) WK="$PWD/$WK" ;; esac
OUT="${OUT:-$work/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export WK OUT
SCHEMATHESIS="$venv/bin/schemathesis" exec "$venv/bin/python" "$here/schemathesis_run.py"
