// Block scan + atomic offset: one pass. The workgroup scans its tile in
// shared memory (scans/tile_scan.wgsl), one thread reserves the tile's output
// range with a single global atomicAdd, and every thread writes its
// survivors there, row after row. All four loads are issued before any
// vote, for memory-level parallelism. Order between tiles follows the
// atomics: not preserved.

#import cull::params::{WORKGROUP_SIZE, TILE, workgroup_index}
#import cull::items::{draw_args, INSTANCE_COUNT, load_items, vote_items, emit_items, pack_votes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}

var<workgroup> row_base: vec4<u32>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let items = load_items(workgroup_index(wid) * TILE + lid);
    let keep = vote_items(items);
    let votes = pack_votes(keep);
    let ranks = scan_tile(lid, votes);
    if lid == 0u {
        let totals = tile_totals;
        let total = totals.x + totals.y + totals.z + totals.w;
        let base = select(0u, atomicAdd(&draw_args[INSTANCE_COUNT], total), total > 0u);
        row_base = vec4<u32>(base) + row_offsets(totals);
    }
    workgroupBarrier();
    let slots = row_base + ranks;
    emit_items(items, keep, slots);
}
