// Subgroup shuffle: a thread's four row votes are packed as the bytes of one
// u32, and the subgroup scans that u32 in registers with shuffle-up steps
// (log2 of the subgroup size, whatever it is), which scans all four rows at
// once (SWAR: a prefix over at most 128 lanes fits a byte). Subgroups
// reserve their ranges in the workgroup with a shared atomic, the workgroup
// in the output with one global atomic; within a subgroup's range survivors
// go row after row, so lanes write consecutive slots. All four loads are
// issued before any vote. With several views, the items are read and
// classified once (cull::items::classify_items), then voted and scanned
// per view, up to four views before one reservation for all of them (as
// subgroup_ballot.wgsl does), then written. Index output is staged in
// workgroup memory instead, two views at a time (cull::scans::staged, as
// subgroup_ballot.wgsl does).
// Output order is not preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_items, classify_items, vote_verdicts, emit_items, pack_votes, unpack_bytes, row_offsets}
#import cull::scans::reserve::{reserve_output, reserve_in_workgroup, reserve_views, view_base}
#ifdef STAGED_INDICES
#import cull::scans::staged::{clear_counts, stage_items, write_pair}
#endif

// One shuffle-up step of the scan, taken where the subgroup is wider than `d`.
fn scan_step(x: u32, d: u32, lane: u32, lanes: u32) -> u32 {
    var sum = x;
    if d < lanes {
        sum += select(0u, subgroupShuffleUp(x, d), lane >= d);
    }
    return sum;
}

// Inclusive Hillis-Steele scan across lanes, in registers: log2 of the
// subgroup size steps, written out to 128 lanes, with no branch that
// splits the subgroup between two shuffles.
fn scan_lanes(votes: u32, lane: u32, lanes: u32) -> u32 {
    var x = scan_step(votes, 1u, lane, lanes);
    x = scan_step(x, 2u, lane, lanes);
    x = scan_step(x, 4u, lane, lanes);
    x = scan_step(x, 8u, lane, lanes);
    x = scan_step(x, 16u, lane, lanes);
    x = scan_step(x, 32u, lane, lanes);
    return scan_step(x, 64u, lane, lanes);
}

// Votes, scans and writes the items of a one-view kernel (the kernel as it
// was before views were batched: the batched form measured 2-4% slower for
// one view at 1M).
fn cull_one_view(items: Items, verdicts: Verdicts, lane: u32, lanes: u32, lid: u32) {
    let keep = vote_verdicts(items, verdicts, 0u);
    let votes = pack_votes(keep);
    let inclusive = scan_lanes(votes, lane, lanes);
    let totals = unpack_bytes(subgroupAdd(votes));
    let base = reserve_output(0u, lane, lid, totals.x + totals.y + totals.z + totals.w);
    let slots = vec4<u32>(base) + row_offsets(totals) + unpack_bytes(inclusive - votes);
    emit_items(0u, items, keep, slots);
}

// A view's packed votes, exclusive ranks and row totals, held until the
// workgroup has reserved every view's range (reserve_views).
struct ViewScan {
    votes: u32,
    exclusive: u32,
    totals: vec4<u32>,
    // Lane 0's: the subgroup's first slot inside the workgroup's range.
    subgroup_base: u32,
}

// Votes and scans the items in `view`, and reserves the subgroup's range
// inside the workgroup's.
fn scan_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, lanes: u32) -> ViewScan {
    let votes = pack_votes(vote_verdicts(items, verdicts, view));
    let inclusive = scan_lanes(votes, lane, lanes);
    let totals = unpack_bytes(subgroupAdd(votes));
    let subgroup_base = reserve_in_workgroup(view, lane, totals.x + totals.y + totals.z + totals.w);
    return ViewScan(votes, inclusive - votes, totals, subgroup_base);
}

#ifdef STAGED_INDICES
// Votes and scans the items in `view` and stages the indices it keeps
// (cull::scans::staged), lane 0's base broadcast once the subgroup is back
// together after the branch that took its atomic.
fn stage_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, lanes: u32) {
    let s = scan_view(view, items, verdicts, lane, lanes);
    let slots = vec4<u32>(subgroupBroadcast(s.subgroup_base, 0u)) + row_offsets(s.totals) + unpack_bytes(s.exclusive);
    stage_items(view, unpack_bytes(s.votes) != vec4<u32>(0u), items.index, slots);
}
#endif

// Writes the items `s` keeps in `view`.
fn emit_view(view: u32, items: Items, s: ViewScan) {
    let slots = vec4<u32>(view_base(view, s.subgroup_base)) + row_offsets(s.totals) + unpack_bytes(s.exclusive);
    emit_items(view, items, unpack_bytes(s.votes) != vec4<u32>(0u), slots);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) lanes: u32,
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
#ifdef STAGED_INDICES
    // Views in pairs, as in subgroup_ballot.wgsl.
    stage_view(0u, items, verdicts, lane, lanes);
#if VIEWS >= 2
    stage_view(1u, items, verdicts, lane, lanes);
#endif
    write_pair(0u, lid);
#if VIEWS >= 3
    workgroupBarrier();
    stage_view(2u, items, verdicts, lane, lanes);
#if VIEWS >= 4
    stage_view(3u, items, verdicts, lane, lanes);
#endif
    write_pair(2u, lid);
#endif
#if VIEWS >= 5
    workgroupBarrier();
    stage_view(4u, items, verdicts, lane, lanes);
#if VIEWS >= 6
    stage_view(5u, items, verdicts, lane, lanes);
#endif
    write_pair(4u, lid);
#endif
#if VIEWS >= 7
    workgroupBarrier();
    stage_view(6u, items, verdicts, lane, lanes);
#if VIEWS >= 8
    stage_view(7u, items, verdicts, lane, lanes);
#endif
    write_pair(6u, lid);
#endif
#else
#if VIEWS == 1
    cull_one_view(items, verdicts, lane, lanes, lid);
#else
    // One block per view of the target, not a loop (see cull::params::VIEWS):
    // views scanned in pairs, one reservation per pair, then the pair
    // written. (Batches of four views, as subgroup_ballot.wgsl takes them,
    // lost and invented survivors on an NVIDIA H200 in kernels of three or
    // more views, where two held.)
    let s0 = scan_view(0u, items, verdicts, lane, lanes);
    let s1 = scan_view(1u, items, verdicts, lane, lanes);
    reserve_views(lid, 0u, 2u);
    emit_view(0u, items, s0);
    emit_view(1u, items, s1);
#if VIEWS >= 3
    let s2 = scan_view(2u, items, verdicts, lane, lanes);
#if VIEWS >= 4
    let s3 = scan_view(3u, items, verdicts, lane, lanes);
#endif
    reserve_views(lid, 2u, 2u);
    emit_view(2u, items, s2);
#if VIEWS >= 4
    emit_view(3u, items, s3);
#endif
#endif
#if VIEWS >= 5
    let s4 = scan_view(4u, items, verdicts, lane, lanes);
#if VIEWS >= 6
    let s5 = scan_view(5u, items, verdicts, lane, lanes);
#endif
    reserve_views(lid, 4u, 2u);
    emit_view(4u, items, s4);
#if VIEWS >= 6
    emit_view(5u, items, s5);
#endif
#endif
#if VIEWS >= 7
    let s6 = scan_view(6u, items, verdicts, lane, lanes);
#if VIEWS >= 8
    let s7 = scan_view(7u, items, verdicts, lane, lanes);
#endif
    reserve_views(lid, 6u, 2u);
    emit_view(6u, items, s6);
#if VIEWS >= 8
    emit_view(7u, items, s7);
#endif
#endif
#endif
#endif
}
