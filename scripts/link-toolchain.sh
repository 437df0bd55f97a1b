#!/usr/bin/env bash
# rust-toolchain.toml pins the MSRV by version. On a machine that has that
# version only as its `stable` toolchain, and no network to download it by
# name, register that toolchain under the version's name too.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
if rustup run "$want" rustc --version >/dev/null 2>&1; then exit 0; fi
have=$(rustup run stable rustc --version 2>/dev/null || true)
case "$have" in
    "rustc $want "*) rustup toolchain link "$want" "$(rustup run stable rustc --print sysroot)"
                     echo "toolchain $want: linked to stable ($have)" ;;
    *) echo "rust-toolchain.toml wants Rust $want; install it (rustup toolchain install $want)"; exit 1 ;;
esac
