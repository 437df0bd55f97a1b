// Block scan + atomic offset: one pass. Each thread votes on ITEMS instances
// (strided so that loads coalesce), the workgroup scans the per-thread counts
// in shared memory, one thread reserves the block's output range with a
// single global atomicAdd, and every thread writes its survivors there.
// Output order follows workgroup completion: not preserved.

const ITEMS: u32 = 4u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS;
// Raking scan: RAKES threads each scan RAKE_LEN counts serially, so the
// workgroup needs 3 barriers instead of 2 * log2(256).
const RAKE_LEN: u32 = 16u;
const RAKES: u32 = WORKGROUP_SIZE / RAKE_LEN;

var<workgroup> counts: array<u32, WORKGROUP_SIZE>;
var<workgroup> rake_totals: array<u32, RAKES>;
var<workgroup> block_base: u32;

@compute @workgroup_size(256)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
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
    counts[lid] = count;
    workgroupBarrier();
    if lid < RAKES {
        var sum = 0u;
        for (var j = 0u; j < RAKE_LEN; j += 1u) {
            sum += counts[lid * RAKE_LEN + j];
            counts[lid * RAKE_LEN + j] = sum; // inclusive within the rake
        }
        rake_totals[lid] = sum;
    }
    workgroupBarrier();
    if lid == 0u {
        var sum = 0u;
        for (var r = 0u; r < RAKES; r += 1u) {
            let t = rake_totals[r];
            rake_totals[r] = sum; // exclusive
            sum += t;
        }
        block_base = select(0u, atomicAdd(&draw_args[1], sum), sum > 0u);
    }
    workgroupBarrier();
    var slot = block_base + rake_totals[lid / RAKE_LEN] + counts[lid] - count;
    for (var k = 0u; k < ITEMS; k += 1u) {
        if (votes & (1u << k)) != 0u {
            emit(slot, tile_start + k * WORKGROUP_SIZE + lid);
            slot += 1u;
        }
    }
}
