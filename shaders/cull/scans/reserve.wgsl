// How the unordered subgroup variants (ballot, shuffle) place a subgroup's
// survivors: each subgroup reserves its range inside the workgroup with one
// shared atomic (no assumption on how subgroups map to local indices, nor
// on their size), and the workgroup its range in the output with one global
// atomic.
#define_import_path cull::scans::reserve

#import cull::params::VIEWS
#import cull::items::{draw_args, count_word}

// One count per view, so no view's count needs resetting. block_base is
// for one view's reservation (reserve_output, the one-view shuffle kernel).
var<workgroup> workgroup_count: array<atomic<u32>, VIEWS>;
var<workgroup> block_base: u32;
// Every view's range in the output at once (reserve_views).
var<workgroup> view_bases: array<u32, VIEWS>;

// The slot in `view`'s list where this subgroup's `subgroup_total`
// survivors start, for a kernel of one view. Every invocation of the
// workgroup must call it (it has two barriers).
fn reserve_output(view: u32, lane: u32, lid: u32, subgroup_total: u32) -> u32 {
    var subgroup_base = 0u;
    if lane == 0u {
        subgroup_base = atomicAdd(&workgroup_count[view], subgroup_total);
    }
    // The barrier first: the whole subgroup is back together when it
    // broadcasts lane 0's value.
    workgroupBarrier();
    subgroup_base = subgroupBroadcast(subgroup_base, 0u);
    if lid == 0u {
        let total = atomicLoad(&workgroup_count[view]);
        block_base = select(0u, atomicAdd(&draw_args[count_word(view)], total), total > 0u);
    }
    workgroupBarrier();
    return block_base + subgroup_base;
}

// The two steps of reserve_output for a batch of views at once, so that a
// workgroup waits on one round of global atomics per batch, not on one per
// view: reserve_in_workgroup per view (lane 0's shared atomic, no barrier),
// then reserve_views once for the `batch` views starting at `first_view`
// (every invocation calls it: two barriers, view v's global atomic taken by
// invocation v), then view_base per view. Batches of VIEW_BATCH: eight
// views ranked before any is written held too many registers. (Index output
// staged in workgroup memory goes in pairs: cull::scans::staged.)
const VIEW_BATCH: u32 = 4u;

fn reserve_in_workgroup(view: u32, lane: u32, subgroup_total: u32) -> u32 {
    var subgroup_base = 0u;
    if lane == 0u {
        subgroup_base = atomicAdd(&workgroup_count[view], subgroup_total);
    }
    return subgroup_base;
}

fn reserve_views(lid: u32, first_view: u32, batch: u32) {
    workgroupBarrier();
    if lid >= first_view && lid < min(first_view + batch, VIEWS) {
        let total = atomicLoad(&workgroup_count[lid]);
        view_bases[lid] = select(0u, atomicAdd(&draw_args[count_word(lid)], total), total > 0u);
    }
    workgroupBarrier();
}

// After reserve_views: where the subgroup's survivors in `view` start
// (`lane_zero_base`: what reserve_in_workgroup gave; lane 0's counts).
// The subgroup is back together after the barriers when it broadcasts.
fn view_base(view: u32, lane_zero_base: u32) -> u32 {
    return view_bases[view] + subgroupBroadcast(lane_zero_base, 0u);
}
