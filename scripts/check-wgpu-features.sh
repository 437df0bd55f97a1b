#!/usr/bin/env bash
# A Bevy app that uses the plugin gets no wgpu feature that Bevy itself did
# not ask for: every feature of wgpu in the plugin's normal dependency graph
# must have a requester other than this workspace's own crates.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(cargo tree -q -p bevy-gpu-cull -e normal,features -i wgpu --prefix depth --depth 2)
awk '
    /^1wgpu feature / { if (feature != "" && !other) bad = bad "\n  " feature; feature = substr($0, 2); other = 0; next }
    /^2/ { if ($0 !~ /^2(cull-core|bevy-gpu-cull) /) other = 1 }
    END {
        if (feature != "" && !other) bad = bad "\n  " feature
        if (bad != "") { print "wgpu features that only this workspace asks for:" bad; exit 1 }
        print "wgpu features: all asked for by Bevy"
    }' <<<"$tree"
