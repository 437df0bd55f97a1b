// Ordered: one pass, survivors in their original order. A chained scan with
// decoupled look-back (Merrill & Garland 2016) in the portable "decoupled
// fallback" form, which assumes no forward progress between workgroups.
// This file holds what both forms share; the entry point and the scan of a
// tile are in variants/ordered_subgroup.wgsl (subgroup ballots) or
// variants/ordered_workgroup.wgsl (workgroup memory, for devices without subgroups).
//
// 1. A workgroup takes the next tile ID from an atomic counter, so tile t's
//    predecessors have all started before it, whatever the dispatch order.
// 2. It votes and scans its tile and publishes the tile's aggregate (its
//    survivor count) in the tile's status word.
// 3. It looks back over its predecessors' status words, a window of
//    WORKGROUP_SIZE at a time, adding aggregates until it meets an inclusive
//    prefix. Only predecessors nearer than the nearest published prefix are
//    waited for, and each wait is bounded: a predecessor that has published
//    nothing within SPIN_LIMIT polls is counted by this workgroup itself from
//    the (read-only) instances. So the pass finishes however workgroups are
//    scheduled.
// 4. It publishes its inclusive prefix and writes its survivors at
//    base + exclusive prefix + rank within the tile, reading them again
//    (from L2: the tile loaded them moments ago) rather than holding them in
//    registers through the look-back, which keeps more workgroups resident.
//
// Culled by cells (cull::cells), the chain walks only the kept cells' tiles,
// in ascending order: chain position p culls the tile of the pth kept cell,
// which its workgroup finds in the cell pass's bits (kept_tile_at), and
// status words are per position. A culled cell's tile takes no part and
// reads nothing.
//
// Several views are culled one dispatch after the other, each view's
// dispatch taking view params.first_view with its own tile counter, base
// and status words (reset in between): a chain that also carried the other
// views in one pass miscounted on NVIDIA (driver 580) where lavapipe was
// exact, so this variant reads the instances once per view.
//
// Status words hold a flag in the top two bits and a count below;
// atomicMax publishes them, so a status only ever moves from nothing to
// aggregate to prefix, and an aggregate counted by a successor (the same
// value) can never overwrite a prefix. WGSL atomics are relaxed: that is
// enough, since each word carries its whole message.
#define_import_path cull::variants::ordered_chain

#import cull::params::{params, WORKGROUP_SIZE, ITEMS, ROW_GROUPS, TILE, workgroup_index}
#import cull::items::{draw_args, count_word, vote}
#ifdef CELLS
#import cull::params::{kept_cells, kept_tile_count, cell_bit_words, kept_bits_word, whole_bits_word}
#endif

// A status word: a flag in the top two bits, a count in the
// LOOKBACK_COUNT_BITS below (cull_core's constant, which also bounds a chunk).
const FLAG_AGGREGATE: u32 = 1u << #{LOOKBACK_COUNT_BITS}u;
const FLAG_PREFIX: u32 = 2u << #{LOOKBACK_COUNT_BITS}u;
const VALUE_MASK: u32 = (1u << #{LOOKBACK_COUNT_BITS}u) - 1u;
// Polls of a silent predecessor before counting it (Tuning::lookback_spin_limit).
const SPIN_LIMIT: u32 = #{SPIN_LIMIT}u;
// Testing only: tiles whose ID has any of these bits set publish nothing,
// which forces their successors through the fallback. 0 in real use.
const SILENT_TILES: u32 = #{SILENT_TILES}u;

// [0]: next tile ID; [1]: the visible count before this chunk; [2 + t]: tile t's status.
@group(0) @binding(#{BINDING_SCAN_STATE}) var<storage, read_write> scan_state: array<atomic<u32>>;

const NO_STOP: u32 = 0xffffffffu;

var<workgroup> tile_and_base: vec2<u32>;
var<workgroup> window_stop: atomic<u32>;
var<workgroup> window_prefix: atomic<u32>;
var<workgroup> window_sum: atomic<u32>;
var<workgroup> window_result: vec2<u32>;

// The next tile ID and the chunk's base (the visible count before it, which
// stays constant during the pass): one round trip before the loads, instead
// of a second one before the writes.
fn take_tile(lid: u32) -> vec2<u32> {
    if lid == 0u {
        tile_and_base = vec2<u32>(atomicAdd(&scan_state[0], 1u), atomicLoad(&scan_state[1]));
    }
    return workgroupUniformLoad(&tile_and_base);
}

// A workgroup's place in the chain: its position, the chain's length, the
// tile at that position, the chunk's base (take_tile), and whether the
// tile is a whole cell's (by cells: its instances kept without their test).
struct ChainPlace {
    position: u32,
    length: u32,
    tile: u32,
    base: u32,
    whole: bool,
}

// Takes the next chain position. `surplus(place)` for a workgroup past the
// chain's end (by cells, past the kept cells; else past the tiles), which
// returns at once: its tile is unset. Uniform across the workgroup.
fn take_place(lid: u32) -> ChainPlace {
    let tile_base = take_tile(lid);
    var place = ChainPlace(tile_base.x, chain_length(), 0u, tile_base.y, false);
    if !surplus(place) {
#ifdef CELLS
        let found = kept_tile_at(place.position, lid);
        place.tile = found.x;
        place.whole = found.y != 0u;
#else
        place.tile = place.position;
#endif
    }
    return place;
}

fn surplus(place: ChainPlace) -> bool {
    return place.position >= place.length;
}

// The chain's length: the chunk's tiles, or by cells its kept ones.
fn chain_length() -> u32 {
#ifdef CELLS
    return kept_tile_count();
#else
    return (params.chunk_len + TILE - 1u) / TILE;
#endif
}

// Whether workgroup `wid` takes a chain position. By cells, only the first
// chain_length() workgroups do: the surplus ones (most of a dispatch that
// covers every tile) return before the tile counter, which they would
// otherwise queue on one atomic each. Exactly chain_length() workgroups
// then take positions 0.. in turn, so each position's predecessors have
// still all started before it.
fn takes_part(wid: vec3<u32>) -> bool {
#ifdef CELLS
    return workgroup_index(wid) < chain_length();
#else
    return true;
#endif
}

#ifdef CELLS
// kept_tile_at's scan of the runs' counts, and its answer.
var<workgroup> kept_run_sums: array<u32, WORKGROUP_SIZE>;
var<workgroup> kept_found: vec2<u32>;

// By cells: the tile of the chunk's `position`th kept cell in ascending
// order, and 1 when that cell is whole (0 otherwise), found by the whole
// workgroup (uniform control flow) in the cell pass's bits: each thread
// counts the kept bits of a run of consecutive words, a scan of the runs'
// counts in workgroup memory gives each run its first position, and the
// thread whose run holds `position` finds its bit. Every workgroup of the
// chain searches for itself rather than read a list that a pass between the
// cell pass and the cull would write: that pass, one workgroup per chunk,
// and the boundary before it cost more than these few loads from L2 and
// barriers per workgroup (measured in docs/benchmarks.md). No subgroup
// operation: both forms of the variant share it. `position` must be below
// kept_tile_count().
fn kept_tile_at(position: u32, lid: u32) -> vec2<u32> {
    // The words of this chunk's cells only (a batch's one chunk may hold
    // far fewer than a chunk can).
    let words = min((params.chunk_len + TILE * 32u - 1u) / (TILE * 32u), cell_bit_words());
    let run = (words + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
    let lo = min(lid * run, words);
    let hi = min(lo + run, words);
    var count = 0u;
    for (var w = lo; w < hi; w++) {
        count += countOneBits(kept_cells[kept_bits_word() + w]);
    }
    // Hillis-Steele over the runs: inclusive sums.
    kept_run_sums[lid] = count;
    for (var d = 1u; d < WORKGROUP_SIZE; d <<= 1u) {
        workgroupBarrier();
        var add = 0u;
        if lid >= d {
            add = kept_run_sums[lid - d];
        }
        workgroupBarrier();
        kept_run_sums[lid] += add;
    }
    var first = kept_run_sums[lid] - count;
    if position >= first && position < first + count {
        for (var w = lo; w < hi; w++) {
            var word = kept_cells[kept_bits_word() + w];
            let n = countOneBits(word);
            if position < first + n {
                // Drop the word's lower kept bits before the one sought.
                for (var k = first; k < position; k++) {
                    word &= word - 1u;
                }
                let bit = firstTrailingBit(word);
                let whole = (kept_cells[whole_bits_word() + w] >> bit) & 1u;
                kept_found = vec2<u32>(w * 32u + bit, whole);
                break;
            }
            first += n;
        }
    }
    return workgroupUniformLoad(&kept_found);
}
#endif

// The tile at chain position `position` (the whole workgroup calls it, in
// uniform control flow).
fn tile_at(position: u32, lid: u32) -> u32 {
#ifdef CELLS
    return kept_tile_at(position, lid).x;
#else
    return position;
#endif
}

fn publishes(tile: u32) -> bool {
    return (tile & SILENT_TILES) == 0u;
}

// The survivors of the tile at chain position `position`, counted by the
// whole workgroup (the fallback), one row at a time so that the fallback
// adds few live registers.
fn count_tile(position: u32, lid: u32) -> u32 {
    let t = tile_at(position, lid);
    var n = 0u;
    for (var k = 0u; k < ITEMS * ROW_GROUPS; k += 1u) {
        if vote(t * TILE + k * WORKGROUP_SIZE + lid, params.first_view) {
            n += 1u;
        }
    }
    workgroupBarrier();
    if lid == 0u {
        atomicStore(&window_sum, 0u);
    }
    workgroupBarrier();
    if n > 0u {
        atomicAdd(&window_sum, n);
    }
    workgroupBarrier();
    if lid == 0u {
        window_result = vec2<u32>(atomicLoad(&window_sum), 0u);
    }
    return workgroupUniformLoad(&window_result).x;
}

// Step 3: the number of survivors in the tiles before `tile`. Thread l
// reads the status of tile pred - 1 - l once; the nearest prefix in the
// window (a shared atomicMin) bounds what is needed, and only unpublished
// tiles nearer than it are polled again. The window stops at its nearest
// prefix or still-silent tile (another atomicMin), and the aggregates before
// the stop are summed with a shared atomicAdd.
fn look_back(tile: u32, lid: u32) -> u32 {
    var exclusive = 0u;
    var pred = tile; // tiles below `pred` are still to be accounted for
    loop {
        if pred == 0u {
            break;
        }
        workgroupBarrier(); // everyone has read the previous window's result
        if lid == 0u {
            atomicStore(&window_stop, NO_STOP);
            atomicStore(&window_prefix, NO_STOP);
            atomicStore(&window_sum, 0u);
        }
        workgroupBarrier();
        // Before tile 0 there is nothing: an inclusive prefix of 0.
        var s = FLAG_PREFIX;
        let index = 2u + pred - 1u - lid;
        if lid < pred {
            s = atomicLoad(&scan_state[index]);
        }
        if (s & FLAG_PREFIX) != 0u {
            atomicMin(&window_prefix, lid);
        }
        workgroupBarrier();
        if lid < atomicLoad(&window_prefix) {
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
    return exclusive;
}

// Steps 2 to 4's bookkeeping, once the tile's survivors are counted: publish
// the aggregate (tile 0's is its inclusive prefix), look back, publish the
// inclusive prefix, and from the chunk's last tile its count (no other tile
// reads draw_args in this pass: they read the base from scan_state[1]).
// Returns the survivors before this tile in the chunk. `tile` is the
// chain position, `tiles` the chain's length (chain_length).
fn chain_tile(tile: u32, tiles: u32, lid: u32, base: u32, aggregate: u32) -> u32 {
    if lid == 0u && publishes(tile) {
        atomicMax(&scan_state[2u + tile], select(FLAG_AGGREGATE, FLAG_PREFIX, tile == 0u) | aggregate);
    }
    let exclusive = look_back(tile, lid);
    if lid == 0u {
        if tile > 0u && publishes(tile) {
            atomicMax(&scan_state[2u + tile], FLAG_PREFIX | (exclusive + aggregate));
        }
        if tile == tiles - 1u {
            atomicStore(&draw_args[count_word(params.first_view)], base + exclusive + aggregate);
        }
    }
    return exclusive;
}

