// Block scan + atomic offset: one pass. A workgroup takes a tile of
// ITEMS x 256 instances; thread t handles item rows k = 0..4 at index
// tile_start + k * 256 + t, so loads (and stores) coalesce. All four loads
// are issued before any vote, for memory-level parallelism. The row votes of
// a thread are packed as the bytes of one u32, so a single shared-memory
// scan yields every row's exclusive prefix at once (SWAR: an exclusive
// prefix over 256 threads is at most 255, so bytes never carry). One thread
// reserves the tile's output range with one global atomicAdd; survivors are
// written row after row, so consecutive threads write consecutive slots.
// Order between tiles follows the atomics: not preserved.

// Raking scan: RAKES threads each scan RAKE_LEN counts serially, then one
// thread scans the rake totals: 3 barriers instead of 2 * log2(256).
const RAKE_LEN: u32 = 16u;
const RAKES: u32 = WORKGROUP_SIZE / RAKE_LEN;

var<workgroup> counts: array<u32, WORKGROUP_SIZE>;
var<workgroup> rake_prefix: array<u32, RAKES>;
var<workgroup> row_base: vec4<u32>;

@compute @workgroup_size(256)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let i0 = workgroup_index(wid) * TILE + lid;
    let i1 = i0 + WORKGROUP_SIZE;
    let i2 = i1 + WORKGROUP_SIZE;
    let i3 = i2 + WORKGROUP_SIZE;
    let d0 = load_item(i0);
    let d1 = load_item(i1);
    let d2 = load_item(i2);
    let d3 = load_item(i3);
    let votes = pack_votes(vec4<bool>(vote_item(i0, d0), vote_item(i1, d1), vote_item(i2, d2), vote_item(i3, d3)));
    counts[lid] = votes;
    workgroupBarrier();
    if lid < RAKES {
        var sum = 0u;
        for (var j = 0u; j < RAKE_LEN; j += 1u) {
            sum += counts[lid * RAKE_LEN + j];
            counts[lid * RAKE_LEN + j] = sum; // inclusive within the rake
        }
        rake_prefix[lid] = sum;
    }
    workgroupBarrier();
    if lid == 0u {
        var prefix = 0u;
        var totals = vec4<u32>(0u);
        for (var r = 0u; r < RAKES; r += 1u) {
            let t = rake_prefix[r];
            rake_prefix[r] = prefix; // exclusive
            prefix += t;
            totals += unpack_bytes(t);
        }
        let total = totals.x + totals.y + totals.z + totals.w;
        let base = select(0u, atomicAdd(&draw_args[1], total), total > 0u);
        row_base = vec4<u32>(base) + row_offsets(totals);
    }
    workgroupBarrier();
    let slots = row_base + unpack_bytes(rake_prefix[lid / RAKE_LEN] + counts[lid] - votes);
    if (votes & 0xffu) != 0u { emit(slots.x, i0, d0); }
    if (votes & 0xff00u) != 0u { emit(slots.y, i1, d1); }
    if (votes & 0xff0000u) != 0u { emit(slots.z, i2, d2); }
    if (votes & 0xff000000u) != 0u { emit(slots.w, i3, d3); }
}
