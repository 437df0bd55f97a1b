// Block scan + atomic offset: one pass. The workgroup scans its tile in
// shared memory (scans/tile_scan.wgsl), one thread reserves the tile's output
// range with a single global atomicAdd, and every thread writes its
// survivors there, row after row. All four loads are issued before any
// vote, for memory-level parallelism. With several views, the items are
// read and classified once (cull::items::classify_items), then voted,
// scanned and written per view. Order between tiles follows the atomics: not preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, draw_args, count_word, load_items, classify_items, vote_verdicts, emit_items, pack_votes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}

var<workgroup> row_base: vec4<u32>;

// Votes, scans and writes the tile's items in `view`. scan_tile's barriers
// also order one view's reads of row_base before thread 0 writes the next.
fn cull_view(view: u32, items: Items, verdicts: Verdicts, lid: u32) {
    let keep = vote_verdicts(items, verdicts, view);
    let ranks = scan_tile(lid, pack_votes(keep));
    if lid == 0u {
        let totals = tile_totals;
        let total = totals.x + totals.y + totals.z + totals.w;
        let base = select(0u, atomicAdd(&draw_args[count_word(view)], total), total > 0u);
        row_base = vec4<u32>(base) + row_offsets(totals);
    }
    workgroupBarrier();
    emit_items(view, items, keep, row_base + ranks);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
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
    cull_view(0u, items, verdicts, lid);
#if VIEWS >= 2
    cull_view(1u, items, verdicts, lid);
#endif
#if VIEWS >= 3
    cull_view(2u, items, verdicts, lid);
#endif
#if VIEWS >= 4
    cull_view(3u, items, verdicts, lid);
#endif
#if VIEWS >= 5
    cull_view(4u, items, verdicts, lid);
#endif
#if VIEWS >= 6
    cull_view(5u, items, verdicts, lid);
#endif
#if VIEWS >= 7
    cull_view(6u, items, verdicts, lid);
#endif
#if VIEWS >= 8
    cull_view(7u, items, verdicts, lid);
#endif
}
