#!/usr/bin/env bash
# Each scan-variant feature of cull-core builds without lint warnings and
# passes its tests alone (with the `parallel` and `blocking` helpers the
# tests use), and none at all is a compile error that says what to enable.
# CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
variants="hillis-steele block-atomic subgroup-ballot subgroup-shuffle ordered ordered-two-pass"
for v in $variants; do
    echo "== cull-core with only the $v variant"
    cargo clippy -q -p cull-core --no-default-features --features "$v parallel blocking" -- -D warnings \
        || { echo "cull-core with only $v has lint warnings (code only the other variants use?)"; exit 1; }
    # One run: its summary lines printed, its status kept.
    status=0
    out=$(cargo test -q -p cull-core --no-default-features --features "$v parallel blocking" 2>&1) || status=$?
    grep -E "^test result|panicked|FAILED|error" <<<"$out" || true
    if [ "$status" -ne 0 ]; then
        echo "cull-core with only $v failed; rerun: cargo test -p cull-core --no-default-features --features \"$v parallel blocking\""
        exit 1
    fi
done
echo "== cull-core with no variant must not build"
if out=$(cargo check -q -p cull-core --no-default-features 2>&1); then
    echo "cull-core built with no scan variant"; exit 1
fi
grep -q "at least one scan-variant feature" <<<"$out" || { echo "unexpected error: $out"; exit 1; }
echo "every variant alone: ok; none: refused with a message"
