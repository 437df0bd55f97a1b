// OrderedTwoPass's vote pass, without subgroups (see
// variants/ordered_votes.wgsl): thread t takes instance k * WORKGROUP_SIZE
// + t of row k of its tile, and each survivor sets its own bit with a
// shared atomic.

#import cull::params::{WORKGROUP_SIZE, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_items, classify_items, vote_verdicts}
#import cull::variants::ordered_votes::{set_bit, publish_tile}

// Votes the thread's rows in `view` and sets the survivors' bits.
fn mark_view(view: u32, items: Items, verdicts: Verdicts, lid: u32) {
    let keep = vote_verdicts(items, verdicts, view);
    if keep.x {
        set_bit(view, lid);
    }
    if keep.y {
        set_bit(view, WORKGROUP_SIZE + lid);
    }
    if keep.z {
        set_bit(view, 2u * WORKGROUP_SIZE + lid);
    }
    if keep.w {
        set_bit(view, 3u * WORKGROUP_SIZE + lid);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn vote_bits(
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
    mark_view(0u, items, verdicts, lid);
#if VIEWS >= 2
    mark_view(1u, items, verdicts, lid);
#endif
#if VIEWS >= 3
    mark_view(2u, items, verdicts, lid);
#endif
#if VIEWS >= 4
    mark_view(3u, items, verdicts, lid);
#endif
#if VIEWS >= 5
    mark_view(4u, items, verdicts, lid);
#endif
#if VIEWS >= 6
    mark_view(5u, items, verdicts, lid);
#endif
#if VIEWS >= 7
    mark_view(6u, items, verdicts, lid);
#endif
#if VIEWS >= 8
    mark_view(7u, items, verdicts, lid);
#endif
    publish_tile(lid, tile);
}
