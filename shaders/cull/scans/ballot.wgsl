// Ballot helpers shared by the passes that use subgroup operations
// (variants/subgroup_ballot.wgsl, variants/ordered_subgroup.wgsl). Ballots
// are 128 bits, so any subgroup size from 4 to 128 lanes works.
#define_import_path cull::scans::ballot

// Bits of the lanes below `lane` in a 128-bit ballot.
fn lanes_below(lane: u32) -> vec4<u32> {
    let word = vec4<u32>(0u, 32u, 64u, 96u);
    let full = vec4<bool>(lane >= 32u, lane >= 64u, lane >= 96u, lane >= 128u);
    let inside = vec4<bool>((lane > 0u) && (lane < 32u), (lane > 32u) && (lane < 64u),
                            (lane > 64u) && (lane < 96u), (lane > 96u) && (lane < 128u));
    let partial = (vec4<u32>(1u) << ((vec4<u32>(lane) - word) & vec4<u32>(31u))) - vec4<u32>(1u);
    return select(select(vec4<u32>(0u), partial, inside), vec4<u32>(0xffffffffu), full);
}

fn popcount_all(v: vec4<u32>) -> u32 {
    let c = countOneBits(v);
    return c.x + c.y + c.z + c.w;
}

// The lanes a subgroup reserved in its workgroup (reserve_lanes).
struct LaneRange {
    // The subgroup's active lanes.
    width: u32,
    // This lane's rank among them.
    rank: u32,
    // Where the subgroup's range starts among the workgroup's invocations.
    first: u32,
}

var<workgroup> lanes_taken: atomic<u32>;

// Reserves a range of `width` lanes for this subgroup with one shared
// atomic, so that a kernel can lay its rows out by subgroup (a row is then
// `width` consecutive instances, in lane order, whatever the subgroup size
// and however invocations map to subgroups). Ranges partition the
// workgroup's invocations.
fn reserve_lanes(lane: u32) -> LaneRange {
    let below = lanes_below(lane);
    let members = subgroupBallot(true);
    let width = popcount_all(members);
    let rank = popcount_all(members & below);
    var first = 0u;
    if rank == 0u {
        first = atomicAdd(&lanes_taken, width);
    }
    return LaneRange(width, rank, subgroupMax(first));
}
