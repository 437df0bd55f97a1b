// Block scan + atomic offset: one pass. The workgroup scans its tile in
// shared memory (scans/tile_scan.wgsl), one thread reserves the tile's output
// range with a single global atomicAdd, and every thread writes its
// survivors there, row after row. All four loads are issued before any
// vote, for memory-level parallelism. With several views, the items are
// read and classified once (cull::items::classify_items), then voted in
// batches of up to four views: one scan of the batch's votes (a view per
// component), one reservation (thread v takes view v's global atomic),
// then the batch written. Order between tiles follows the atomics: not
// preserved.

#import cull::params::{params, WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, draw_args, count_word, load_items, classify_items, vote_verdicts, emit_items, pack_votes, unpack_bytes, row_offsets}
#import cull::scans::tile_scan::{scan_tile, tile_totals}
#if VIEWS > 1
#import cull::params::VIEWS
#import cull::scans::tile_scan::{scan_tile_views, view_tile_totals}
#endif

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

#if VIEWS > 1
// Each batch view's rows' first slots (cull_views).
var<workgroup> view_row_base: array<vec4<u32>, 4>;

// The packed votes of views first .. first + 4 (zero past VIEWS: `first`
// and VIEWS are constants, so the blocks past it fold away).
fn batch_votes(first: u32, items: Items, verdicts: Verdicts) -> vec4<u32> {
    var votes = vec4<u32>(0u);
    votes.x = pack_votes(vote_verdicts(items, verdicts, first));
    if first + 1u < VIEWS {
        votes.y = pack_votes(vote_verdicts(items, verdicts, first + 1u));
    }
    if first + 2u < VIEWS {
        votes.z = pack_votes(vote_verdicts(items, verdicts, first + 2u));
    }
    if first + 3u < VIEWS {
        votes.w = pack_votes(vote_verdicts(items, verdicts, first + 3u));
    }
    return votes;
}

// Writes the items `votes` keeps in `view` (packed votes and ranks).
fn emit_packed(view: u32, items: Items, votes: u32, ranks: u32, base: vec4<u32>) {
    emit_items(view, items, unpack_bytes(votes) != vec4<u32>(0u), base + unpack_bytes(ranks));
}

// Votes, scans and writes the tile's items in views first .. first + 4
// (those below VIEWS). The scan's barriers order the last batch's reads
// of view_row_base before this batch's writes.
fn cull_views(first: u32, items: Items, verdicts: Verdicts, lid: u32) {
    let votes = batch_votes(first, items, verdicts);
    let ranks = scan_tile_views(lid, votes);
    if lid < 4u && first + lid < VIEWS {
        let totals = view_tile_totals[lid];
        let total = totals.x + totals.y + totals.z + totals.w;
        let base = select(0u, atomicAdd(&draw_args[count_word(first + lid)], total), total > 0u);
        view_row_base[lid] = vec4<u32>(base) + row_offsets(totals);
    }
    workgroupBarrier();
    emit_packed(first, items, votes.x, ranks.x, view_row_base[0]);
    if first + 1u < VIEWS {
        emit_packed(first + 1u, items, votes.y, ranks.y, view_row_base[1]);
    }
    if first + 2u < VIEWS {
        emit_packed(first + 2u, items, votes.z, ranks.z, view_row_base[2]);
    }
    if first + 3u < VIEWS {
        emit_packed(first + 3u, items, votes.w, ranks.w, view_row_base[3]);
    }
}
#endif

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
    // One view, or batches of four views (see cull::params::VIEWS: blocks,
    // not a loop).
#if VIEWS == 1
    cull_view(0u, items, verdicts, lid);
#else
    cull_views(0u, items, verdicts, lid);
#endif
#if VIEWS >= 5
    cull_views(4u, items, verdicts, lid);
#endif
}
