// Block scan + atomic offset: one pass. The workgroup scans its tile in
// shared memory (scans/tile_scan.wgsl), one thread reserves the tile's output
// range with a single global atomicAdd, and every thread writes its
// survivors there, row after row. All four loads are issued before any
// vote, for memory-level parallelism. With several views, the items are
// read and their world spheres computed once, then voted, scanned and
// written per view. Order between tiles follows the atomics: not preserved.

#import cull::params::{WORKGROUP_SIZE, TILE, VIEWS, workgroup_index, past_views}
#import cull::items::{draw_args, count_word, load_items, item_spheres, vote_spheres, emit_items, pack_votes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}

var<workgroup> row_base: vec4<u32>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let items = load_items(workgroup_index(wid) * TILE + lid);
    let spheres = item_spheres(items);
    for (var view = 0u; view < VIEWS; view += 1u) {
        if past_views(view) {
            break;
        }
        let keep = vote_spheres(items, spheres, view);
        // scan_tile's barriers also order this view's reads of row_base
        // before thread 0 writes the next view's.
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
}
