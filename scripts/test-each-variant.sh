#!/usr/bin/env bash
# Each scan-variant feature of cull-core alone builds without lint warnings
# (library, tests and examples, type-checked by clippy), and none at all is
# a compile error that says what to enable.
#
# Every build composes each kernel against its own variant's shader modules
# alone (`shader::compose`), so the README's test command, which composes
# and validates every kernel of every variant (`every_module_validates`)
# and runs the GPU suite on each, checks each variant's kernels as its own
# build has them. The rest of a one-variant build at run time (which
# variant `best_available` and the fallback pick, `VariantNotCompiled` for
# the others) is not run here: `cargo test -p cull-core
# --no-default-features --features "VARIANT parallel blocking"` runs it.
# Checking instead of building keeps this stage to a few minutes on a cold
# machine.
#
# CI runs this (.ci/run), with clippy-driver compiling the workspace's crates
# (through scripts/lint-and-document.sh); run alone, it sets clippy-driver.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="${RUSTFLAGS--D warnings}"
if [ -z "${RUSTC_WORKSPACE_WRAPPER:-}" ]; then
    RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
    export RUSTC_WORKSPACE_WRAPPER
fi
variants="hillis-steele block-atomic subgroup-ballot subgroup-shuffle ordered ordered-two-pass"
for v in $variants; do
    start=$SECONDS
    if ! out=$(cargo check -q -p cull-core --no-default-features --features "$v parallel blocking" \
        --lib --tests --examples 2>&1); then
        tail -n 60 <<<"$out"
        echo "cull-core with only $v failed to check; rerun: cargo clippy -p cull-core --all-targets --no-default-features --features \"$v parallel blocking\""
        exit 1
    fi
    echo "cull-core with only $v: checked, lint-free ($((SECONDS - start)) s)"
done
# What a renderer that only culls builds (as the Bevy plugin does): one
# variant, none of the optional features (no rayon, no pollster).
if ! out=$(cargo check -q -p cull-core --no-default-features --features block-atomic --lib 2>&1); then
    tail -n 60 <<<"$out"
    echo "cull-core with one variant and no optional feature failed to check"
    exit 1
fi
echo "cull-core with one variant and no optional feature: checked, lint-free"
echo "== cull-core with no variant must not build"
if out=$(cargo check -q -p cull-core --no-default-features 2>&1); then
    echo "cull-core built with no scan variant"; exit 1
fi
grep -q "at least one scan-variant feature" <<<"$out" || { echo "unexpected error: $out"; exit 1; }
echo "every variant alone: ok; none: refused with a message"
