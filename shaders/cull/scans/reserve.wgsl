// How the unordered subgroup variants (ballot, shuffle) place a subgroup's
// survivors: each subgroup reserves its range inside the workgroup with one
// shared atomic (no assumption on how subgroups map to local indices, nor
// on their size), and the workgroup its range in the output with one global
// atomic.
#define_import_path cull::scans::reserve

#import cull::params::VIEWS
#import cull::items::{draw_args, count_word}

// One count per view, so no view's count needs resetting. block_base is
// reused: every thread reads view v's before the first barrier of view
// v + 1, after which thread 0 writes the next.
var<workgroup> workgroup_count: array<atomic<u32>, VIEWS>;
var<workgroup> block_base: u32;

// The slot in `view`'s list where this subgroup's `subgroup_total`
// survivors start. Every invocation of the workgroup must call it (it has
// two barriers).
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
