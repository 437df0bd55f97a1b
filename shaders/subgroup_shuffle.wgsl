// Subgroup shuffle: each thread counts its survivors among ITEMS instances,
// and the subgroup scans those counts in registers with shuffle-up steps
// (log2 of the subgroup size, whatever it is). Subgroups reserve their
// ranges in the workgroup with a shared atomic, the workgroup in the output
// with one global atomic. Output order is not preserved.

const ITEMS: u32 = 4u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS;

var<workgroup> workgroup_count: atomic<u32>;
var<workgroup> block_base: u32;

@compute @workgroup_size(256)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) lanes: u32,
) {
    let tile_start = workgroup_index(wid) * TILE;
    var votes = 0u;
    var count = 0u;
    for (var k = 0u; k < ITEMS; k += 1u) {
        if vote(tile_start + k * WORKGROUP_SIZE + lid) {
            votes |= 1u << k;
            count += 1u;
        }
    }
    // Inclusive Hillis-Steele scan across lanes, in registers.
    var inclusive = count;
    for (var d = 1u; d < lanes; d <<= 1u) {
        let up = subgroupShuffleUp(inclusive, d);
        if lane >= d {
            inclusive += up;
        }
    }
    // The scan is non-decreasing: its maximum is the subgroup's total.
    let subgroup_total = subgroupMax(inclusive);
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
    var slot = block_base + subgroup_base + inclusive - count;
    for (var k = 0u; k < ITEMS; k += 1u) {
        if (votes & (1u << k)) != 0u {
            emit(slot, tile_start + k * WORKGROUP_SIZE + lid);
            slot += 1u;
        }
    }
}
