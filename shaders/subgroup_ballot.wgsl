// Subgroup ballot: every vote is one bit of a subgroup ballot. A thread's
// rank among its subgroup's survivors is the number of set bits of lower
// lanes; the subgroup's count is the ballot's population. Each subgroup then
// reserves its range inside the workgroup with one shared atomic (no
// assumption on how subgroups map to local indices or on their size: 4 to
// 128 lanes), and the workgroup its range in the output with one global
// atomic. Output order is not preserved.

const ITEMS: u32 = 4u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS;

var<workgroup> workgroup_count: atomic<u32>;
var<workgroup> block_base: u32;

// Bits of the lanes below `lane` in a 128-bit ballot.
fn lanes_below(lane: u32) -> vec4<u32> {
    let word = vec4<u32>(0u, 32u, 64u, 96u);
    let full = vec4<bool>(lane >= 32u, lane >= 64u, lane >= 96u, lane >= 128u);
    let inside = vec4<bool>((lane > 0u) && (lane < 32u), (lane > 32u) && (lane < 64u),
                            (lane > 64u) && (lane < 96u), (lane > 96u) && (lane < 128u));
    let partial = (vec4<u32>(1u) << ((vec4<u32>(lane) - word) & vec4<u32>(31u))) - vec4<u32>(1u);
    return select(select(vec4<u32>(0u), partial, inside), vec4<u32>(0xffffffffu), full);
}

fn popcount4(v: vec4<u32>) -> u32 {
    let c = countOneBits(v);
    return c.x + c.y + c.z + c.w;
}

@compute @workgroup_size(256)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let tile_start = workgroup_index(wid) * TILE;
    let below = lanes_below(lane);
    var votes = 0u;
    var ranks: array<u32, ITEMS>;
    var subgroup_total = 0u;
    for (var k = 0u; k < ITEMS; k += 1u) {
        let visible = vote(tile_start + k * WORKGROUP_SIZE + lid);
        let ballot = subgroupBallot(visible);
        ranks[k] = subgroup_total + popcount4(ballot & below);
        if visible {
            votes |= 1u << k;
        }
        subgroup_total += popcount4(ballot);
    }
    var subgroup_base = 0u;
    if lane == 0u {
        subgroup_base = atomicAdd(&workgroup_count, subgroup_total);
    }
    subgroup_base = subgroupBroadcast(subgroup_base, 0u);
    workgroupBarrier();
    if lid == 0u {
        let total = atomicLoad(&workgroup_count);
        block_base = select(0u, atomicAdd(&draw_args[1], total), total > 0u);
    }
    workgroupBarrier();
    let base = block_base + subgroup_base;
    for (var k = 0u; k < ITEMS; k += 1u) {
        if (votes & (1u << k)) != 0u {
            emit(base + ranks[k], tile_start + k * WORKGROUP_SIZE + lid);
        }
    }
}
