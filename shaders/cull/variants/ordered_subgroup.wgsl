// Ordered, with subgroups: a tile's votes are scanned with ballots, as in
// variants/subgroup_ballot.wgsl, but in index order. Each subgroup reserves a range
// of lanes with one shared atomic (cull::scans::ballot::reserve_lanes: any
// subgroup size, any mapping of invocations to subgroups) and takes ITEMS rows of that many consecutive
// instances from ITEMS times the range's start: so the tile's order is
// subgroup range, then row, then lane, and a survivor's rank in the tile is
// the survivors of earlier ranges (one shared array, one barrier), then of
// earlier rows, then of lower lanes (the ballot).
//
// With ROW_GROUPS = 2 (16-byte instances) a lane takes 2 * ITEMS rows, in two
// groups of ITEMS: the tile then carries as many bytes as a 32-byte one, so
// the chain's fixed cost per tile (tile ID, look-back, publishing) is spread
// over as many bytes. The second group is loaded after the first is voted
// (a barrier keeps the compiler from hoisting its loads): with both in
// flight the pass needed 59 registers instead of 47, and ran slower.

#import cull::params::{params, WORKGROUP_SIZE, ITEMS, ROW_GROUPS, TILE}
#import cull::items::{Items, load_rows, vote_items, emit_again, row_offsets}
#import cull::scans::ballot::{lanes_below, popcount_all, reserve_lanes}
#import cull::variants::ordered_chain::{take_place, surplus, chain_tile, takes_part}

// Survivors of the subgroup whose lane range starts at each index; zero elsewhere.
var<workgroup> range_counts: array<u32, WORKGROUP_SIZE>;

// One group of ITEMS rows: their votes, each kept item's rank among the
// group's survivors (by row, then lane), and the group's survivor count.
struct RowVotes {
    keep: vec4<bool>,
    ranks: vec4<u32>,
    count: u32,
}

fn scan_rows(items: Items, whole: bool, below: vec4<u32>) -> RowVotes {
    let keep = vote_items(items, params.first_view, whole);
    let b0 = subgroupBallot(keep.x);
    let b1 = subgroupBallot(keep.y);
    let b2 = subgroupBallot(keep.z);
    let b3 = subgroupBallot(keep.w);
    let counts = vec4<u32>(popcount_all(b0), popcount_all(b1), popcount_all(b2), popcount_all(b3));
    let ranks = row_offsets(counts)
        + vec4<u32>(popcount_all(b0 & below), popcount_all(b1 & below), popcount_all(b2 & below), popcount_all(b3 & below));
    return RowVotes(keep, ranks, counts.x + counts.y + counts.z + counts.w);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    if !takes_part(wid) {
        return;
    }
    // This subgroup's lanes: how many, this one's rank, and where their
    // range starts in the workgroup (reserved while thread 0 takes the tile).
    let below = lanes_below(lane);
    let range = reserve_lanes(lane);
    let width = range.width;
    let rank = range.rank;
    let first = range.first;
    let place = take_place(lid);
    if surplus(place) {
        return;
    }

    let start = place.tile * TILE + ITEMS * ROW_GROUPS * first + rank;
    let lo = load_rows(start, width);
    let votes_lo = scan_rows(lo, place.whole, below);
    var hi: Items;
    var votes_hi = RowVotes(vec4<bool>(false), vec4<u32>(0u), 0u);
    if ROW_GROUPS > 1u {
        workgroupBarrier(); // see the top of this file
        hi = load_rows(start + ITEMS * width, width);
        votes_hi = scan_rows(hi, place.whole, below);
    }
    if rank == 0u {
        range_counts[first] = votes_lo.count + votes_hi.count;
    }
    workgroupBarrier();
    // Survivors of the ranges before this subgroup's, and of the whole tile.
    var before = 0u;
    var all = 0u;
    for (var j = rank; j < WORKGROUP_SIZE; j += width) {
        let c = range_counts[j];
        all += c;
        before += select(0u, c, j < first);
    }
    before = subgroupAdd(before);
    let aggregate = subgroupAdd(all);
    let exclusive = chain_tile(place.position, place.length, lid, place.base, aggregate);
    let slots = vec4<u32>(place.base + exclusive + before);
    emit_again(params.first_view, votes_lo.keep, lo.index, slots + votes_lo.ranks);
    if ROW_GROUPS > 1u {
        emit_again(params.first_view, votes_hi.keep, hi.index, slots + votes_lo.count + votes_hi.ranks);
    }
}
