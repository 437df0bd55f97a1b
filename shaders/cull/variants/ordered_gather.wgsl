// OrderedTwoPass's gather pass (see variants/ordered_votes.wgsl): workgroup
// (block, view) writes the survivors of GATHER_TILES tiles in one view, in
// index order. The block's words of bits are spread over the invocations;
// a workgroup scan of their set bits gives each word's first slot, and the
// block's first slot is the chunk's base for the view plus the survivors of
// the tiles before it. With few survivors, invocation t then writes the
// block's survivors t, t + WORKGROUP_SIZE, ..., finding each one's word by a
// binary search of the words' first survivors and its bit by halving the
// word, so every lane writes; with many, each invocation tests its bit of
// each row of WORKGROUP_SIZE instances. Either way a row of lanes fills
// consecutive slots. (Small blocks measured fastest: each invocation's
// serial part is short; docs/benchmarks.md.)

#import cull::params::{params, WORKGROUP_SIZE, TILE}
#import cull::items::{draw_args, count_word, emit_reading}
#import cull::variants::ordered_votes::{vote_bits, tile_sums, TILE_WORDS, SUPER_TILES, BLOCK_WORDS, GATHER_TILES, bits_index, count_index, super_index}

// The words' scan: RAKES invocations each add RAKE_LEN words serially (at
// most 16 rakes), then one adds the rakes' totals.
const RAKE_LEN: u32 = (BLOCK_WORDS + 15u) / 16u;
const RAKES: u32 = BLOCK_WORDS / RAKE_LEN;
// Rows of WORKGROUP_SIZE instances in a block.
const BLOCK_ROWS: u32 = BLOCK_WORDS * 32u / WORKGROUP_SIZE;
// Up to this many survivors in a block (one in eight of its instances),
// each invocation searches for its survivors (a few searches each); above
// it, each tests its bit of every row (BLOCK_ROWS tests, cheaper than many
// searches; docs/benchmarks.md has the measurements).
const SPARSE_SURVIVORS: u32 = 4u * BLOCK_WORDS;

// The block's words; their set bits scanned within each rake (inclusive),
// then each word's first survivor in the block (exclusive); each rake's
// exclusive prefix.
var<workgroup> words: array<u32, BLOCK_WORDS>;
var<workgroup> word_first: array<u32, BLOCK_WORDS>;
var<workgroup> rake_prefix: array<u32, RAKES>;
// Survivors of the chunk before the block (summed by every invocation),
// then the block's first slot and its survivors.
var<workgroup> block_before: atomic<u32>;
var<workgroup> block_slot: u32;
var<workgroup> block_total: u32;

// The word holding the block's survivor `j`: the last word whose first
// survivor is at most `j` (words without survivors share the next one's).
fn word_of(j: u32) -> u32 {
    var w = 0u;
    for (var step = BLOCK_WORDS / 2u; step > 0u; step /= 2u) {
        if word_first[w + step] <= j {
            w += step;
        }
    }
    return w;
}

// The position of set bit `k` (from 0, lowest first) of `word`.
fn nth_set_bit(word: u32, k: u32) -> u32 {
    var w = word;
    var left = k;
    var at = 0u;
    for (var width = 16u; width > 0u; width /= 2u) {
        let low = countOneBits(w & ((1u << width) - 1u));
        if left >= low {
            left -= low;
            w >>= width;
            at += width;
        }
    }
    return at;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn gather(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let view = wid.z;
    let block = wid.y * groups.x + wid.x;
    let first_tile = block * GATHER_TILES;
    // A surplus workgroup of a two-dimensional dispatch (uniform).
    if first_tile >= params.tile_capacity {
        return;
    }
    // The survivors before the block: the earlier super-tiles' sums, then
    // the earlier tiles of its own super-tile.
    let super_tile = first_tile / SUPER_TILES;
    var before = 0u;
    for (var s = lid; s < super_tile; s += WORKGROUP_SIZE) {
        before += atomicLoad(&tile_sums[super_index(s, view)]);
    }
    for (var t = super_tile * SUPER_TILES + lid; t < first_tile; t += WORKGROUP_SIZE) {
        before += atomicLoad(&tile_sums[count_index(t, view)]);
    }
    if before != 0u {
        atomicAdd(&block_before, before);
    }
    // The block's words (invocation lid takes word lid, and lid +
    // WORKGROUP_SIZE... where a block has more): none for a tile without
    // survivors (whose bits this cull may not have written: by cells, a
    // culled cell's tile). Count and bits are loaded at once (the scratch
    // holds every tile below params.tile_capacity, a multiple of
    // GATHER_TILES).
    for (var w = lid; w < BLOCK_WORDS; w += WORKGROUP_SIZE) {
        let tile = first_tile + w / TILE_WORDS;
        let count = atomicLoad(&tile_sums[count_index(tile, view)]);
        let bits = vote_bits[bits_index(tile, view, w % TILE_WORDS)];
        let word = select(0u, bits, count != 0u);
        words[w] = word;
        word_first[w] = countOneBits(word);
    }
    workgroupBarrier();
    if lid < RAKES {
        var sum = 0u;
        for (var j = 0u; j < RAKE_LEN; j += 1u) {
            sum += word_first[lid * RAKE_LEN + j];
            word_first[lid * RAKE_LEN + j] = sum;
        }
        rake_prefix[lid] = sum;
    }
    workgroupBarrier();
    if lid == 0u {
        var prefix = 0u;
        for (var r = 0u; r < RAKES; r += 1u) {
            let total = rake_prefix[r];
            rake_prefix[r] = prefix;
            prefix += total;
        }
        block_total = prefix;
        block_slot = atomicLoad(&tile_sums[view]) + atomicLoad(&block_before);
        if prefix != 0u {
            atomicAdd(&draw_args[count_word(view)], prefix);
        }
    }
    workgroupBarrier();
    for (var w = lid; w < BLOCK_WORDS; w += WORKGROUP_SIZE) {
        word_first[w] = rake_prefix[w / RAKE_LEN] + word_first[w] - countOneBits(words[w]);
    }
    workgroupBarrier();
    let slot = block_slot;
    let total = block_total;
    if total <= SPARSE_SURVIVORS {
        // Few survivors: survivor j of the block goes to slot + j, each
        // invocation finding its survivors' words and bits, so every lane
        // writes, to consecutive slots.
        for (var j = lid; j < total; j += WORKGROUP_SIZE) {
            let w = word_of(j);
            let i = first_tile * TILE + w * 32u + nth_set_bit(words[w], j - word_first[w]);
            emit_reading(view, slot + j, i);
        }
    } else {
        // Many: rows of WORKGROUP_SIZE instances, each invocation testing its
        // bit of each row (a row's survivors go to consecutive slots).
        for (var r = 0u; r < BLOCK_ROWS; r += 1u) {
            let at = r * WORKGROUP_SIZE + lid;
            let w = at / 32u;
            let row_bits = words[w];
            let bit = at % 32u;
            if ((row_bits >> bit) & 1u) != 0u {
                let rank = countOneBits(row_bits & ((1u << bit) - 1u));
                emit_reading(view, slot + word_first[w] + rank, first_tile * TILE + at);
            }
        }
    }
}
