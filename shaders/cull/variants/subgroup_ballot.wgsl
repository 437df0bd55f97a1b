// Subgroup ballot: every vote is one bit of a subgroup ballot. A thread's
// rank among its subgroup's survivors in a row is the number of set bits of
// lower lanes; the row's count is the ballot's population. Each subgroup
// reserves its range inside the workgroup with one shared atomic (no
// assumption on how subgroups map to local indices, nor on their size: 4 to
// 128 lanes), and the workgroup its range in the output with one global
// atomic. Within a subgroup's range survivors go row after row, so lanes
// write consecutive slots. All four loads are issued before any vote.
// With several views, the items are read and classified once (see
// cull::items::classify_items), then voted and ranked per view, up to four
// views before one reservation for all of them (two barriers and one round
// of global atomics per batch of views, not per view), then written. Index
// output is staged in workgroup memory instead, two views at a time, and
// written by the workgroup in whole rows (cull::scans::staged): the same
// slots, fewer instructions per view.
// Output order is not preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_items, classify_items, vote_verdicts, row_offsets}
#import cull::scans::reserve::{reserve_in_workgroup, reserve_views, view_base, VIEW_BATCH}
#import cull::scans::ballot::{lanes_below, popcount_all}
#import cull::scans::ballot_rows::emit_rows
#ifdef STAGED_INDICES
#import cull::scans::staged::{clear_counts, stage_items, write_pair}
#endif

// A view's votes and ranks, held until the workgroup has reserved every
// view's range (reserve_views).
struct ViewRanks {
    keep: vec4<bool>,
    ranks: vec4<u32>,
    // Each row's count (shared by the subgroup).
    totals: vec4<u32>,
    // Lane 0's: the subgroup's first slot inside the workgroup's range.
    subgroup_base: u32,
}

// Votes and ranks the items in `view`, and reserves the subgroup's range
// inside the workgroup's.
fn rank_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, below: vec4<u32>) -> ViewRanks {
    let v = vote_verdicts(items, verdicts, view);
    let b0 = subgroupBallot(v.x);
    let b1 = subgroupBallot(v.y);
    let b2 = subgroupBallot(v.z);
    let b3 = subgroupBallot(v.w);
    let totals = vec4<u32>(popcount_all(b0), popcount_all(b1), popcount_all(b2), popcount_all(b3));
    let ranks = row_offsets(totals)
        + vec4<u32>(popcount_all(b0 & below), popcount_all(b1 & below), popcount_all(b2 & below), popcount_all(b3 & below));
    return ViewRanks(v, ranks, totals, reserve_in_workgroup(view, lane, totals.x + totals.y + totals.z + totals.w));
}

#ifdef STAGED_INDICES
// Votes and ranks the items in `view` and stages the indices it keeps
// (cull::scans::staged): nothing is held for the write. Lane 0's base is
// broadcast as soon as the subgroup is back together after the branch
// that took its atomic (as cull::scans::ballot::reserve_lanes does), not
// after the reservation's barriers: the rows are written before them.
fn stage_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, below: vec4<u32>) {
    let r = rank_view(view, items, verdicts, lane, below);
    stage_items(view, r.keep, items.index, vec4<u32>(subgroupBroadcast(r.subgroup_base, 0u)) + r.ranks);
}
#endif

// Writes the items `r` keeps in `view` (a subgroup of `width` active
// lanes, this one at `position` among them, writes each row together:
// cull::scans::ballot_rows).
fn emit_view(view: u32, items: Items, r: ViewRanks, position: u32, width: u32) {
    emit_rows(view, items, r.keep, view_base(view, r.subgroup_base), r.ranks, r.totals, position, width);
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
#ifdef STAGED_INDICES
    // After the loads are issued, so that they are in flight meanwhile.
    clear_counts(lid);
#endif
    let verdicts = classify_items(items, workgroup_tile_whole(wid));
    let below = lanes_below(lane);
#ifdef STAGED_INDICES
    // Views in pairs: each pair staged, reserved and written; the next
    // pair's staging waits at a barrier until every invocation has written
    // the rows out.
    stage_view(0u, items, verdicts, lane, below);
#if VIEWS >= 2
    stage_view(1u, items, verdicts, lane, below);
#endif
    write_pair(0u, lid);
#if VIEWS >= 3
    workgroupBarrier();
    stage_view(2u, items, verdicts, lane, below);
#if VIEWS >= 4
    stage_view(3u, items, verdicts, lane, below);
#endif
    write_pair(2u, lid);
#endif
#if VIEWS >= 5
    workgroupBarrier();
    stage_view(4u, items, verdicts, lane, below);
#if VIEWS >= 6
    stage_view(5u, items, verdicts, lane, below);
#endif
    write_pair(4u, lid);
#endif
#if VIEWS >= 7
    workgroupBarrier();
    stage_view(6u, items, verdicts, lane, below);
#if VIEWS >= 8
    stage_view(7u, items, verdicts, lane, below);
#endif
    write_pair(6u, lid);
#endif
#else
    // The subgroup's active lanes and this lane's place among them, for
    // writing rows together (a subgroup may be partly filled: a workgroup
    // smaller than the device's subgroup).
    let members = subgroupBallot(true);
    let width = popcount_all(members);
    let position = popcount_all(members & below);
    // One block per view of the target, not a loop (see cull::params::VIEWS):
    // views ranked in batches of four (cull::scans::reserve::VIEW_BATCH),
    // one reservation per batch, then the batch written.
    let r0 = rank_view(0u, items, verdicts, lane, below);
#if VIEWS >= 2
    let r1 = rank_view(1u, items, verdicts, lane, below);
#endif
#if VIEWS >= 3
    let r2 = rank_view(2u, items, verdicts, lane, below);
#endif
#if VIEWS >= 4
    let r3 = rank_view(3u, items, verdicts, lane, below);
#endif
    reserve_views(lid, 0u, VIEW_BATCH);
    emit_view(0u, items, r0, position, width);
#if VIEWS >= 2
    emit_view(1u, items, r1, position, width);
#endif
#if VIEWS >= 3
    emit_view(2u, items, r2, position, width);
#endif
#if VIEWS >= 4
    emit_view(3u, items, r3, position, width);
#endif
#if VIEWS >= 5
    let r4 = rank_view(4u, items, verdicts, lane, below);
#endif
#if VIEWS >= 6
    let r5 = rank_view(5u, items, verdicts, lane, below);
#endif
#if VIEWS >= 7
    let r6 = rank_view(6u, items, verdicts, lane, below);
#endif
#if VIEWS >= 8
    let r7 = rank_view(7u, items, verdicts, lane, below);
#endif
#if VIEWS >= 5
    reserve_views(lid, 4u, VIEW_BATCH);
    emit_view(4u, items, r4, position, width);
#endif
#if VIEWS >= 6
    emit_view(5u, items, r5, position, width);
#endif
#if VIEWS >= 7
    emit_view(6u, items, r6, position, width);
#endif
#if VIEWS >= 8
    emit_view(7u, items, r7, position, width);
#endif
#endif
}
