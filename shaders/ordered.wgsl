// Ordered: one pass, survivors in their original order. A chained scan with
// decoupled look-back (Merrill & Garland 2016) in the portable "decoupled
// fallback" form, which assumes no forward progress between workgroups:
//
// 1. A workgroup takes the next tile ID from an atomic counter, so tile t's
//    predecessors have all started before it, whatever the dispatch order.
// 2. It scans its tile (tile_scan.wgsl) and publishes the tile's aggregate
//    (its survivor count) in the tile's status word.
// 3. It walks back over its predecessors' status words, a workgroup's
//    worth at a time,
//    adding aggregates until it meets an inclusive prefix. A predecessor
//    that has published nothing within SPIN_LIMIT polls is not waited for:
//    the workgroup counts that tile's survivors itself from the (read-only)
//    instances and goes on. Every wait is bounded, so the pass finishes
//    however workgroups are scheduled.
// 4. It publishes its inclusive prefix and writes its survivors at
//    base + exclusive prefix + rank within the tile.
//
// Status words hold a flag in the top two bits and a 30-bit count below;
// atomicMax publishes them, so a status only ever moves from nothing to
// aggregate to prefix, and an aggregate counted by a successor (the same
// value) can never overwrite a prefix. WGSL atomics are relaxed: that is
// enough, since each word carries its whole message.

const FLAG_AGGREGATE: u32 = 0x40000000u;
const FLAG_PREFIX: u32 = 0x80000000u;
const VALUE_MASK: u32 = 0x3fffffffu;
// Polls of a silent predecessor before counting it (set by Rust).
const SPIN_LIMIT: u32 = 256u;
// Testing only: tiles whose ID has any of these bits set publish nothing,
// which forces their successors through the fallback. 0 in real use.
const SILENT_TILES: u32 = 0u;

// [0]: next tile ID; [1]: the visible count before this chunk; [2 + t]: tile t's status.
@group(0) @binding(10) var<storage, read_write> scan_state: array<atomic<u32>>;

const NO_STOP: u32 = 0xffffffffu;

var<workgroup> tile_id: u32;
var<workgroup> window_stop: atomic<u32>;
var<workgroup> window_sum: atomic<u32>;
var<workgroup> window_result: vec2<u32>;
var<workgroup> recount: atomic<u32>;
var<workgroup> recounted: u32;

// The survivors of tile `t`, counted by the whole workgroup (the fallback).
fn count_tile(t: u32, lid: u32) -> u32 {
    let keep = vote_items(load_items(t * TILE + lid));
    let n = dot(select(vec4<u32>(0u), vec4<u32>(1u), keep), vec4<u32>(1u));
    workgroupBarrier();
    if lid == 0u {
        atomicStore(&recount, 0u);
    }
    workgroupBarrier();
    if n > 0u {
        atomicAdd(&recount, n);
    }
    workgroupBarrier();
    if lid == 0u {
        recounted = atomicLoad(&recount);
    }
    return workgroupUniformLoad(&recounted);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(@builtin(local_invocation_index) lid: u32) {
    if lid == 0u {
        tile_id = atomicAdd(&scan_state[0], 1u);
    }
    let tile = workgroupUniformLoad(&tile_id);
    let tiles = (params.chunk_len + TILE - 1u) / TILE;
    if tile >= tiles {
        return; // a surplus workgroup of a two-dimensional dispatch
    }
    let items = load_items(tile * TILE + lid);
    let keep = vote_items(items);
    let votes = pack_votes(keep);
    let ranks = scan_tile(lid, votes);
    let totals = workgroupUniformLoad(&tile_totals);
    let aggregate = totals.x + totals.y + totals.z + totals.w;
    let publish = (tile & SILENT_TILES) == 0u;
    if lid == 0u && publish {
        let status = select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u) | aggregate;
        atomicMax(&scan_state[2u + tile], status);
    }

    // Look back over a window of WORKGROUP_SIZE predecessors at a time,
    // nearest first: thread l reads (and if need be polls) the status of
    // tile pred - 1 - l, the window stops at its nearest prefix or silent
    // tile (a shared atomicMin), and the aggregates before it are summed
    // (a shared atomicAdd), all in parallel.
    var exclusive = 0u;
    var pred = tile; // tiles below `pred` are still to be accounted for
    loop {
        if pred == 0u {
            break;
        }
        workgroupBarrier(); // everyone has read the previous window's result
        if lid == 0u {
            atomicStore(&window_stop, NO_STOP);
            atomicStore(&window_sum, 0u);
        }
        workgroupBarrier();
        // Before tile 0 there is nothing: an inclusive prefix of 0.
        var s = FLAG_PREFIX;
        if lid < pred {
            let index = 2u + pred - 1u - lid;
            s = atomicLoad(&scan_state[index]);
            for (var spin = 0u; spin < SPIN_LIMIT && s == 0u; spin += 1u) {
                s = atomicLoad(&scan_state[index]);
            }
        }
        // Stop codes order by distance; at one distance a tile is either
        // silent (2l) or a prefix (2l + 1).
        if s == 0u {
            atomicMin(&window_stop, 2u * lid);
        } else if (s & FLAG_PREFIX) != 0u {
            atomicMin(&window_stop, 2u * lid + 1u);
        }
        workgroupBarrier();
        let stop = atomicLoad(&window_stop);
        // Aggregates nearer than the stop count, and so does a prefix at it.
        if s != 0u && (2u * lid + 1u) <= stop && (s & VALUE_MASK) != 0u {
            atomicAdd(&window_sum, s & VALUE_MASK);
        }
        workgroupBarrier();
        if lid == 0u {
            window_result = vec2<u32>(atomicLoad(&window_sum), atomicLoad(&window_stop));
        }
        let result = workgroupUniformLoad(&window_result);
        exclusive += result.x;
        if result.y == NO_STOP {
            pred -= WORKGROUP_SIZE; // all aggregates: on to the next window
        } else if (result.y & 1u) != 0u {
            break; // met an inclusive prefix
        } else {
            // A silent predecessor: count its survivors here, and publish
            // them to spare the tiles behind this one the same work.
            let silent_tile = pred - 1u - result.y / 2u;
            let counted = count_tile(silent_tile, lid);
            if lid == 0u {
                atomicMax(&scan_state[2u + silent_tile], FLAG_AGGREGATE | counted);
            }
            exclusive += counted;
            pred = silent_tile;
        }
    }

    let base = atomicLoad(&scan_state[1]);
    if lid == 0u {
        if tile > 0u && publish {
            atomicMax(&scan_state[2u + tile], FLAG_PREFIX | (exclusive + aggregate));
        }
        if tile == tiles - 1u {
            // The last tile knows the chunk's total; no other tile reads
            // draw_args in this pass (they read the base from scan_state[1]).
            atomicStore(&draw_args[1], base + exclusive + aggregate);
        }
    }
    let slots = vec4<u32>(base + exclusive) + row_offsets(totals) + ranks;
    emit_items(items, keep, slots);
}
