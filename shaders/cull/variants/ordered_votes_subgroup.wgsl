// OrderedTwoPass's vote pass, with subgroups (see variants/ordered_votes.wgsl).
// As in variants/ordered_subgroup.wgsl, each subgroup reserves a range of
// lanes (cull::scans::ballot::reserve_lanes) and takes ITEMS rows of that
// many consecutive instances from ITEMS times the range's start, so a row's ballot is the
// bits of consecutive instances: its lane 0 sets them with one shared
// atomic per word, not one per survivor.

#import cull::params::{WORKGROUP_SIZE, ITEMS, TILE, workgroup_tile, workgroup_tile_whole}
#ifdef CELLS
#import cull::params::NO_TILE
#endif
#import cull::items::{Items, Verdicts, load_rows, classify_items, vote_verdicts}
#import cull::scans::ballot::reserve_lanes
#import cull::variants::ordered_votes::{or_word, publish_tile}

// A row's ballot (`width` lanes, lane 0 at bit `first` of the tile).
fn or_ballot(view: u32, first: u32, width: u32, ballot: vec4<u32>) {
    or_word(view, first, ballot.x);
    if width > 32u {
        or_word(view, first + 32u, ballot.y);
    }
    if width > 64u {
        or_word(view, first + 64u, ballot.z);
    }
    if width > 96u {
        or_word(view, first + 96u, ballot.w);
    }
}

// Votes the subgroup's rows in `view` and sets their bits (lane 0, whose
// rows start at bit `first`).
fn mark_view(view: u32, items: Items, verdicts: Verdicts, first: u32, width: u32, rank: u32) {
    let keep = vote_verdicts(items, verdicts, view);
    let b0 = subgroupBallot(keep.x);
    let b1 = subgroupBallot(keep.y);
    let b2 = subgroupBallot(keep.z);
    let b3 = subgroupBallot(keep.w);
    if rank == 0u {
        or_ballot(view, first, width, b0);
        or_ballot(view, first + width, width, b1);
        or_ballot(view, first + 2u * width, width, b2);
        or_ballot(view, first + 3u * width, width, b3);
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn vote_bits(
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let tile = workgroup_tile(wid);
#ifdef CELLS
    if tile == NO_TILE {
        return;
    }
#endif
    // This subgroup's lanes: how many, this one's rank, and where their
    // range starts in the workgroup.
    let range = reserve_lanes(lane);
    let width = range.width;
    let rank = range.rank;
    let first = range.first;
    let items = load_rows(tile * TILE + ITEMS * first + rank, width);
    let verdicts = classify_items(items, workgroup_tile_whole(wid));
    // One block per view (see cull::params::VIEWS).
    mark_view(0u, items, verdicts, ITEMS * first, width, rank);
#if VIEWS >= 2
    mark_view(1u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 3
    mark_view(2u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 4
    mark_view(3u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 5
    mark_view(4u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 6
    mark_view(5u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 7
    mark_view(6u, items, verdicts, ITEMS * first, width, rank);
#endif
#if VIEWS >= 8
    mark_view(7u, items, verdicts, ITEMS * first, width, rank);
#endif
    publish_tile(lid, tile);
}
