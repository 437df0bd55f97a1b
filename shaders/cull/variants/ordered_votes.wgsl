// OrderedTwoPass: survivors in their original order, in two passes and no
// wait between workgroups. What both passes share: where the votes and the
// counts live, and how the vote pass publishes a tile.
//
// 1. The vote pass (variants/ordered_votes_subgroup.wgsl, or
//    variants/ordered_votes_workgroup.wgsl without subgroups) reads each
//    instance once, votes it in every view, and writes one bit per instance
//    and view in index order, each tile's survivor count per view, and adds
//    that count to its super-tile's sum (SUPER_TILES tiles). No workgroup
//    waits on another.
// 2. The gather pass (variants/ordered_gather.wgsl) takes GATHER_TILES tiles
//    per workgroup and view: the survivors before them are the sums of the
//    earlier super-tiles plus the counts of the earlier tiles of their own
//    super-tile (at most SUPER_TILES + a few reads, from L2), and each
//    survivor's slot is that plus the set bits before it. It writes the
//    survivors in order, reading an instance again only for instance
//    copies (an index needs only the bit).
//
// Every tile's bits and counts are written by the vote pass whatever it
// keeps, so they need no clearing; the counts and sums are cleared per
// chunk because by cells (cull::cells) the tiles of culled cells are not
// visited, and their counts must read zero.
#define_import_path cull::variants::ordered_votes

#import cull::params::{params, TILE, VIEWS, MAX_VIEWS, WORKGROUP_SIZE}

// Words of one tile's bits in one view.
const TILE_WORDS: u32 = TILE / 32u;
// Tiles whose counts one sum covers (cull_core's ORDERED_SUPER_TILES).
const SUPER_TILES: u32 = #{ORDERED_SUPER_TILES}u;
// Tiles one gather workgroup writes (cull_core's ORDERED_GATHER_TILES), and
// their words.
const GATHER_TILES: u32 = #{ORDERED_GATHER_TILES}u;
const BLOCK_WORDS: u32 = GATHER_TILES * TILE_WORDS;

// Bit i of word w of (tile, view): instance tile * TILE + 32 * w + i of the
// chunk is kept in the view. Tiles after each other, views within a tile.
@group(0) @binding(#{BINDING_VOTE_BITS}) var<storage, read_write> vote_bits: array<u32>;
// [0, MAX_VIEWS): each view's count before this chunk (copied from the draw
// arguments before the chunk's passes); then a count per (tile, view) for
// params.tile_capacity tiles; then a sum per (super-tile, view).
@group(0) @binding(#{BINDING_TILE_SUMS}) var<storage, read_write> tile_sums: array<atomic<u32>>;

fn bits_index(tile: u32, view: u32, word: u32) -> u32 {
    return (tile * VIEWS + view) * TILE_WORDS + word;
}

fn count_index(tile: u32, view: u32) -> u32 {
    return MAX_VIEWS + tile * VIEWS + view;
}

fn super_index(super_tile: u32, view: u32) -> u32 {
    return MAX_VIEWS + (params.tile_capacity + super_tile) * VIEWS + view;
}

// The tile's bits per view, set by the vote pass's forms (zero at the start:
// WGSL zeroes workgroup memory), and its counts.
var<workgroup> tile_bits: array<atomic<u32>, VIEWS * TILE_WORDS>;
var<workgroup> tile_total: array<atomic<u32>, VIEWS>;

// Sets bit `bit` of the tile's bits in `view`.
fn set_bit(view: u32, bit: u32) {
    atomicOr(&tile_bits[view * TILE_WORDS + bit / 32u], 1u << (bit % 32u));
}

// Sets bits `first` .. `first` + 32 of the tile's bits in `view` where
// `word` has them (a subgroup's ballot, its lane 0 at `first`).
fn or_word(view: u32, first: u32, word: u32) {
    if word == 0u {
        return;
    }
    let at = view * TILE_WORDS + first / 32u;
    let shift = first % 32u;
    atomicOr(&tile_bits[at], word << shift);
    if shift != 0u {
        let spill = word >> (32u - shift);
        if spill != 0u {
            atomicOr(&tile_bits[at + 1u], spill);
        }
    }
}

// Once every invocation has set its bits: writes the tile's bits and counts
// out, and adds the counts to the super-tile's sums. Every invocation of the
// workgroup must call it (two barriers).
fn publish_tile(lid: u32, tile: u32) {
    workgroupBarrier();
    for (var w = lid; w < VIEWS * TILE_WORDS; w += WORKGROUP_SIZE) {
        let word = atomicLoad(&tile_bits[w]);
        vote_bits[tile * VIEWS * TILE_WORDS + w] = word;
        if word != 0u {
            atomicAdd(&tile_total[w / TILE_WORDS], countOneBits(word));
        }
    }
    workgroupBarrier();
    if lid < VIEWS {
        let total = atomicLoad(&tile_total[lid]);
        atomicStore(&tile_sums[count_index(tile, lid)], total);
        if total != 0u {
            atomicAdd(&tile_sums[super_index(tile / SUPER_TILES, lid)], total);
        }
    }
}
