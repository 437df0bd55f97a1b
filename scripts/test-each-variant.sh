#!/usr/bin/env bash
# Each scan-variant feature of cull-core builds without lint warnings
# (library, tests and examples) and passes its unit tests and an exact-set
# test alone (every format, camera and size, index output; with the
# `parallel` and `blocking` helpers the tests use), and none at all is a
# compile error that says what to enable. The whole GPU suite, every exact
# set of every variant among them, runs once, with every variant compiled
# in, in the README's test command.
# CI runs this (.ci/run), with clippy-driver compiling the workspace's crates
# so that one build both lints and tests; run alone, it sets the same.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="${RUSTFLAGS--D warnings}"
if [ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ]; then
    RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
    export RUSTC_WORKSPACE_WRAPPER
fi
variants="hillis-steele block-atomic subgroup-ballot subgroup-shuffle ordered ordered-two-pass"
for v in $variants; do
    echo "== cull-core with only the $v variant"
    start=$SECONDS
    # One run: its summary lines printed, its status kept.
    status=0
    features=(-p cull-core --no-default-features --features "$v parallel blocking")
    out=$({ cargo test -q "${features[@]}" --lib --examples &&
        cargo test -q "${features[@]}" --test gpu -- --exact exact_sets::every_variant_matches_reference_indices; } 2>&1) || status=$?
    grep -E "^test result|panicked|FAILED|^(error|warning)" <<<"$out" || true
    # The exact-set test ran (a renamed test would otherwise pass as none).
    if [ "$status" -eq 0 ] && ! grep -q "^test result: ok. 1 passed" <<<"$out"; then
        echo "cull-core with only $v: the exact-set test did not run"; status=1
    fi
    if [ "$status" -ne 0 ]; then
        tail -n 60 <<<"$out"
        echo "cull-core with only $v failed (lints or tests); rerun: cargo clippy -p cull-core --all-targets --no-default-features --features \"$v parallel blocking\" and cargo test with the same features"
        exit 1
    fi
    echo "   $v: $((SECONDS - start)) s"
done
echo "== cull-core with no variant must not build"
if out=$(cargo check -q -p cull-core --no-default-features 2>&1); then
    echo "cull-core built with no scan variant"; exit 1
fi
grep -q "at least one scan-variant feature" <<<"$out" || { echo "unexpected error: $out"; exit 1; }
echo "every variant alone: ok; none: refused with a message"
