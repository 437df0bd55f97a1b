// Ordered, without subgroups: a tile's votes are scanned in workgroup memory
// (scans/tile_scan.wgsl, as block_atomic.wgsl does). Thread t holds instance
// tile_start + k * WORKGROUP_SIZE + t of row k, so ranks taken row after row
// are the instances' order within the tile.

#import cull::params::{params, WORKGROUP_SIZE, TILE}
#import cull::items::{load_items, vote_items, emit_again, pack_votes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}
#import cull::variants::ordered_chain::{take_place, surplus, chain_tile, takes_part}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    if !takes_part(wid) {
        return;
    }
    let place = take_place(lid);
    if surplus(place) {
        return;
    }

    let index = vec4<u32>(place.tile * TILE + lid) + vec4<u32>(0u, 1u, 2u, 3u) * WORKGROUP_SIZE;
    let keep = vote_items(load_items(index.x), params.first_view, place.whole);
    let ranks = scan_tile(lid, pack_votes(keep));
    let totals = workgroupUniformLoad(&tile_totals);
    let aggregate = totals.x + totals.y + totals.z + totals.w;
    let exclusive = chain_tile(place.position, place.length, lid, place.base, aggregate);
    emit_again(params.first_view, keep, index, vec4<u32>(place.base + exclusive) + row_offsets(totals) + ranks);
}
