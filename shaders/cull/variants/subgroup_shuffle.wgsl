// Subgroup shuffle: a thread's four row votes are packed as the bytes of one
// u32, and the subgroup scans that u32 in registers with shuffle-up steps
// (log2 of the subgroup size, whatever it is), which scans all four rows at
// once (SWAR: a prefix over at most 128 lanes fits a byte). Subgroups
// reserve their ranges in the workgroup with a shared atomic, the workgroup
// in the output with one global atomic; within a subgroup's range survivors
// go row after row, so lanes write consecutive slots. All four loads are
// issued before any vote. With several views, the items are read and
// classified once (cull::items::classify_items), then voted, scanned and
// written per view.
// Output order is not preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_items, classify_items, vote_verdicts, emit_items, pack_votes, unpack_bytes, row_offsets}
#import cull::scans::reserve::reserve_output

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

// Votes, scans and writes the items in `view`.
fn cull_view(view: u32, items: Items, verdicts: Verdicts, lane: u32, lanes: u32, lid: u32) {
    let keep = vote_verdicts(items, verdicts, view);
    let votes = pack_votes(keep);
    let inclusive = scan_lanes(votes, lane, lanes);
    let totals = unpack_bytes(subgroupAdd(votes));
    let base = reserve_output(view, lane, lid, totals.x + totals.y + totals.z + totals.w);
    let slots = vec4<u32>(base) + row_offsets(totals) + unpack_bytes(inclusive - votes);
    emit_items(view, items, keep, slots);
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
    let verdicts = classify_items(items, workgroup_tile_whole(wid));
    // One block per view of the target, not a loop (see cull::params::VIEWS).
    cull_view(0u, items, verdicts, lane, lanes, lid);
#if VIEWS >= 2
    cull_view(1u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 3
    cull_view(2u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 4
    cull_view(3u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 5
    cull_view(4u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 6
    cull_view(5u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 7
    cull_view(6u, items, verdicts, lane, lanes, lid);
#endif
#if VIEWS >= 8
    cull_view(7u, items, verdicts, lane, lanes, lid);
#endif
}
