// Block scan + atomic offset: one pass. The workgroup scans its tile in
// shared memory (tile_scan.wgsl), one thread reserves the tile's output
// range with a single global atomicAdd, and every thread writes its
// survivors there, row after row. All four loads are issued before any
// vote, for memory-level parallelism. Order between tiles follows the
// atomics: not preserved.

var<workgroup> row_base: vec4<u32>;

@compute @workgroup_size(WORKGROUP_SIZE)
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
    let ranks = scan_tile(lid, votes);
    if lid == 0u {
        let totals = tile_totals;
        let total = totals.x + totals.y + totals.z + totals.w;
        let base = select(0u, atomicAdd(&draw_args[1], total), total > 0u);
        row_base = vec4<u32>(base) + row_offsets(totals);
    }
    workgroupBarrier();
    let slots = row_base + ranks;
    if (votes & 0xffu) != 0u { emit(slots.x, i0, d0); }
    if (votes & 0xff00u) != 0u { emit(slots.y, i1, d1); }
    if (votes & 0xff0000u) != 0u { emit(slots.z, i2, d2); }
    if (votes & 0xff000000u) != 0u { emit(slots.w, i3, d3); }
}
