#!/usr/bin/env bash
# Documents cull-core and bevy-gpu-cull with rustdoc, as `cargo doc` would,
# from the dependencies the last CI build compiled (scripts/lint-and-document.sh
# wrote down how, in `$CARGO_TARGET_DIR/debug/doc-args/`): warnings denied, so
# a broken intra-doc link fails. The docs go where `cargo doc` puts them,
# `$CARGO_TARGET_DIR/doc`. Run from the workspace's root, after that build.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
rustdoc="$(rustc --print sysroot)/bin/rustdoc"
for package in cull-core bevy-gpu-cull; do
    crate="${package//-/_}"
    recorded="$target/debug/doc-args/$crate"
    if [ ! -f "$recorded" ]; then
        echo "no build of $crate recorded in $target: build the workspace with RUSTC_WORKSPACE_WRAPPER=scripts/lint-and-document.sh first"
        exit 1
    fi
    # The file holds the crate's environment, `--`, then rustdoc's arguments.
    mapfile -d '' recorded_words <"$recorded"
    env=() args=()
    for word in "${recorded_words[@]}"; do
        if [ ${#args[@]} -eq 0 ] && [ "$word" != -- ]; then env+=("$word"); else args+=("$word"); fi
    done
    # This clone's manifest folder, whichever clone sharing the build cache
    # last compiled the crate (its `env!` reads it; the source path is
    # relative to the workspace's root).
    env "${env[@]}" CARGO_MANIFEST_DIR="$PWD/crates/$package" \
        "$rustdoc" "${args[@]:1}" -o "$target/doc" -D warnings
    echo "$crate documented, no warnings: $target/doc/$crate/index.html"
done
