// Subgroup ballot: every vote is one bit of a subgroup ballot. A thread's
// rank among its subgroup's survivors in a row is the number of set bits of
// lower lanes; the row's count is the ballot's population. Each subgroup
// reserves its range inside the workgroup with one shared atomic (no
// assumption on how subgroups map to local indices, nor on their size: 4 to
// 128 lanes), and the workgroup its range in the output with one global
// atomic. Within a subgroup's range survivors go row after row, so lanes
// write consecutive slots. All four loads are issued before any vote.
// With several views, the items are read and classified once (see
// cull::items::classify_items), then voted, ranked and written per view.
// Output order is not preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_items, classify_items, vote_verdicts, emit_items, row_offsets}
#import cull::scans::reserve::reserve_output
#import cull::scans::ballot::{lanes_below, popcount_all}

// Votes, ranks and writes the items in `view`.
fn cull_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, lid: u32, below: vec4<u32>) {
    let v = vote_verdicts(items, verdicts, view);
    let b0 = subgroupBallot(v.x);
    let b1 = subgroupBallot(v.y);
    let b2 = subgroupBallot(v.z);
    let b3 = subgroupBallot(v.w);
    let totals = vec4<u32>(popcount_all(b0), popcount_all(b1), popcount_all(b2), popcount_all(b3));
    let ranks = row_offsets(totals)
        + vec4<u32>(popcount_all(b0 & below), popcount_all(b1 & below), popcount_all(b2 & below), popcount_all(b3 & below));
    let base = reserve_output(view, lane, lid, totals.x + totals.y + totals.z + totals.w);
    emit_items(view, items, v, vec4<u32>(base) + ranks);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let tile = workgroup_tile(wid);
#ifdef CELLS
    if tile == NO_TILE {
        return;
    }
#endif
    let items = load_items(tile * TILE + lid);
    let verdicts = classify_items(items, workgroup_tile_whole(wid));
    let below = lanes_below(lane);
    // One block per view of the target, not a loop (see cull::params::VIEWS).
    cull_view(0u, items, verdicts, lane, lid, below);
#if VIEWS >= 2
    cull_view(1u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 3
    cull_view(2u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 4
    cull_view(3u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 5
    cull_view(4u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 6
    cull_view(5u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 7
    cull_view(6u, items, verdicts, lane, lid, below);
#endif
#if VIEWS >= 8
    cull_view(7u, items, verdicts, lane, lid, below);
#endif
}
