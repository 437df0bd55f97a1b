#!/usr/bin/env bash
# Each scan-variant feature of cull-core alone builds without lint warnings
# (library, tests and examples, type-checked by clippy), and none at all is
# a compile error that says what to enable.
#
# What differs at run time between a build with one variant and one with
# all of them is the shader library a kernel is composed against; the crate
# composes every kernel against its own variant's modules alone in every
# build (`shader::compose`), so the README's test command, which validates
# every kernel of every variant (`every_module_validates`) and runs the GPU
# suite on each, covers each variant's own build. Checking instead of
# building keeps this stage to a few minutes on a cold machine.
#
# CI runs this (.ci/run), with clippy-driver compiling the workspace's crates;
# run alone, it sets the same.
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
echo "== cull-core with no variant must not build"
if out=$(cargo check -q -p cull-core --no-default-features 2>&1); then
    echo "cull-core built with no scan variant"; exit 1
fi
grep -q "at least one scan-variant feature" <<<"$out" || { echo "unexpected error: $out"; exit 1; }
echo "every variant alone: ok; none: refused with a message"
