// How the unordered subgroup variants (ballot, shuffle) place a subgroup's
// survivors: each subgroup reserves its range inside the workgroup with one
// shared atomic (no assumption on how subgroups map to local indices, nor
// on their size), and the workgroup its range in the output with one global
// atomic.
#define_import_path cull::scans::reserve

#import cull::items::{draw_args, INSTANCE_COUNT}

var<workgroup> workgroup_count: atomic<u32>;
var<workgroup> block_base: u32;

// The output slot where this subgroup's `subgroup_total` survivors start.
// Every invocation of the workgroup must call it (it has two barriers).
fn reserve_output(lane: u32, lid: u32, subgroup_total: u32) -> u32 {
    var subgroup_base = 0u;
    if lane == 0u {
        subgroup_base = atomicAdd(&workgroup_count, subgroup_total);
    }
    subgroup_base = subgroupBroadcast(subgroup_base, 0u);
    workgroupBarrier();
    if lid == 0u {
        let total = atomicLoad(&workgroup_count);
        block_base = select(0u, atomicAdd(&draw_args[INSTANCE_COUNT], total), total > 0u);
    }
    workgroupBarrier();
    return block_base + subgroup_base;
}
