#!/usr/bin/env bash
# The compiler of the workspace's own crates in CI (`RUSTC_WORKSPACE_WRAPPER`,
# called as `lint-and-document.sh RUSTC ARGS...`), so that one build of the
# dependencies serves the tests, the lints and the docs:
#
# - every workspace crate is compiled by clippy-driver: compiled as rustc
#   would, and linted, with the build's own flags (`-D warnings` in CI);
# - for the two published libraries, it writes down how rustdoc documents
#   them from the same compiled dependencies, as `cargo doc` would:
#   `doc-args/CRATE` beside the build's `deps/` folder, which
#   scripts/document.sh runs (CI runs it beside the tests, off the build's
#   critical path).
#
# `cargo doc` would need its own build of every dependency (metadata only,
# but Bevy's whole graph once more), which is why CI documents this way.
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
# incremental cache, no output folder (scripts/document.sh gives it), and
# diagnostics as a person reads them (rustdoc runs outside cargo).
doc_args=(--crate-version "${CARGO_PKG_VERSION:-0.0.0}")
for ((i = 0; i < ${#args[@]}; i++)); do
    a="${args[i]}"
    case "$a" in
    --emit=* | -Cincremental=* | --error-format=* | --json=*) ;;
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
# With the environment cargo compiles the crate in (CARGO_MANIFEST_DIR and
# the package's other variables, which `env!` reads), then the arguments.
mkdir -p "$out_dir/../doc-args"
{
    env -0 | grep -z '^CARGO_' | grep -zv '^CARGO_MAKEFLAGS='
    printf '%s\0' -- "${doc_args[@]}"
} >"$out_dir/../doc-args/$crate.tmp"
mv "$out_dir/../doc-args/$crate.tmp" "$out_dir/../doc-args/$crate"
