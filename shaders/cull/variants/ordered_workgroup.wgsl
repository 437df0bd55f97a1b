// Ordered, without subgroups: a tile's votes are scanned in workgroup memory
// (scans/tile_scan.wgsl, as block_atomic.wgsl does). Thread t holds instance
// tile_start + k * WORKGROUP_SIZE + t of row k, so ranks taken row after row
// are the instances' order within the tile.

#import cull::params::{params, WORKGROUP_SIZE, TILE, VIEWS, past_views}
#import cull::items::{load_items, vote_items, emit_again, pack_votes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}
#import cull::variants::ordered_chain::{take_tile, chain_tile, view_base}

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(@builtin(local_invocation_index) lid: u32) {
    let tile = take_tile(lid);
    let tiles = (params.chunk_len + TILE - 1u) / TILE;
    if tile >= tiles {
        return; // a surplus workgroup of a two-dimensional dispatch
    }

    let index = vec4<u32>(tile * TILE + lid) + vec4<u32>(0u, 1u, 2u, 3u) * WORKGROUP_SIZE;
    let items = load_items(index.x);
    // Views one after the other, each with its own chain (scan_tile's
    // barriers order one view's reads of the shared scan before the next
    // view's writes).
    for (var view = 0u; view < VIEWS; view += 1u) {
        if past_views(view) {
            break;
        }
        let keep = vote_items(items, view);
        let ranks = scan_tile(lid, pack_votes(keep));
        let totals = workgroupUniformLoad(&tile_totals);
        let aggregate = totals.x + totals.y + totals.z + totals.w;
        let exclusive = chain_tile(view, tile, tiles, lid, aggregate);
        emit_again(view, keep, index, vec4<u32>(view_base(view) + exclusive) + row_offsets(totals) + ranks);
    }
}
