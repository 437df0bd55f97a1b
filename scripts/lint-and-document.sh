#!/usr/bin/env bash
# The compiler of the workspace's own crates in CI (`RUSTC_WORKSPACE_WRAPPER`,
# called as `lint-and-document.sh RUSTC ARGS...`), so that one build of the
# dependencies serves the tests, the lints and the docs:
#
# - every workspace crate is compiled by clippy-driver: compiled as rustc
#   would, and linted, with the build's own flags (`-D warnings` in CI);
# - the two published libraries are then documented by rustdoc, from the
#   same compiled dependencies, as `cargo doc` would document them: warnings
#   denied, so a broken intra-doc link fails the build. The docs are written
#   to `$GPU_CULL_DOC_DIR`, or to `doc/` beside the build's profile folder
#   (where `cargo doc` writes them).
#
# `cargo doc` would need its own build of every dependency (metadata only,
# but Bevy's whole graph once more), which is why CI documents here.
set -euo pipefail
sysroot="$("$1" --print sysroot)"
"$sysroot/bin/clippy-driver" "$@"

# Only the libraries (`--crate-type lib`, not their test harnesses) of the
# two published crates, and only where they are built (a check build, as
# scripts/test-each-variant.sh makes with one variant at a time, is not
# documented: docs.rs documents all features).
shift
crate="" kind="" out_dir="" emit=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[i]}" in
    --crate-name) crate="${args[i + 1]}" ;;
    --crate-type) kind="${args[i + 1]}" ;;
    --out-dir) out_dir="${args[i + 1]}" ;;
    --emit=*) emit="${args[i]}" ;;
    esac
done
case "$crate" in cull_core | bevy_gpu_cull) ;; *) exit 0 ;; esac
[ "$kind" = lib ] || exit 0
case "$emit" in *link*) ;; *) exit 0 ;; esac

# rustc's arguments as rustdoc takes them: the same crate, features, cfgs,
# edition, dependencies and lint levels; no emitted artifacts, no
# incremental cache, the docs' folder in place of the output folder.
doc_dir="${GPU_CULL_DOC_DIR:-$out_dir/../../doc}"
doc_args=()
for ((i = 0; i < ${#args[@]}; i++)); do
    a="${args[i]}"
    case "$a" in
    --emit=* | -Cincremental=*) ;;
    --out-dir) i=$((i + 1)) ;;
    -C)
        case "${args[i + 1]}" in
        incremental=* | embed-bitcode=* | codegen-units=*) i=$((i + 1)) ;;
        *) doc_args+=("$a" "${args[i + 1]}") && i=$((i + 1)) ;;
        esac
        ;;
    *) doc_args+=("$a") ;;
    esac
done
exec "$sysroot/bin/rustdoc" "${doc_args[@]}" -o "$doc_dir" \
    --crate-version "${CARGO_PKG_VERSION:-0.0.0}" -D warnings
