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

// The lane of the `n`-th set bit (from 0) of a 128-bit ballot: the lane
// whose rank among the ballot's lanes is `n`. Meaningless (but a lane
// below 128) when the ballot has no more than `n` bits set.
fn nth_lane(ballot: vec4<u32>, n: u32) -> u32 {
    let c = countOneBits(ballot);
    var k = n;
    var word = ballot.x;
    var lane = 0u;
    if k >= c.x {
        k -= c.x;
        word = ballot.y;
        lane = 32u;
        if k >= c.y {
            k -= c.y;
            word = ballot.z;
            lane = 64u;
            if k >= c.z {
                k -= c.z;
                word = ballot.w;
                lane = 96u;
            }
        }
    }
    // Halve the word's range while the bit lies above the lower half.
    let below16 = countOneBits(word & 0xffffu);
    if k >= below16 { k -= below16; word >>= 16u; lane += 16u; }
    let below8 = countOneBits(word & 0xffu);
    if k >= below8 { k -= below8; word >>= 8u; lane += 8u; }
    let below4 = countOneBits(word & 0xfu);
    if k >= below4 { k -= below4; word >>= 4u; lane += 4u; }
    let below2 = countOneBits(word & 0x3u);
    if k >= below2 { k -= below2; word >>= 2u; lane += 2u; }
    if k >= (word & 1u) { lane += 1u; }
    return lane;
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
