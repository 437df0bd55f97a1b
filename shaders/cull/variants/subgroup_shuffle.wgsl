// Subgroup shuffle: a thread's four row votes are packed as the bytes of one
// u32, and the subgroup scans that u32 in registers with shuffle-up steps
// (log2 of the subgroup size, whatever it is), which scans all four rows at
// once (SWAR: a prefix over at most 128 lanes fits a byte). Subgroups
// reserve their ranges in the workgroup with a shared atomic, the workgroup
// in the output with one global atomic; within a subgroup's range survivors
// go row after row, so lanes write consecutive slots. All four loads are
// issued before any vote. With several views, the items are read and their
// world spheres computed once, then voted, scanned and written per view.
// Output order is not preserved.

#import cull::params::{WORKGROUP_SIZE, TILE, VIEWS, workgroup_index, past_views}
#import cull::items::{load_items, item_spheres, vote_spheres, emit_items, pack_votes, unpack_bytes, row_offsets}
#import cull::scans::reserve::reserve_output

@compute @workgroup_size(WORKGROUP_SIZE)
fn cull(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) lanes: u32,
) {
    let items = load_items(workgroup_index(wid) * TILE + lid);
    let spheres = item_spheres(items);
    for (var view = 0u; view < VIEWS; view += 1u) {
        if past_views(view) {
            break;
        }
        let keep = vote_spheres(items, spheres, view);
        let votes = pack_votes(keep);
        // Inclusive Hillis-Steele scan across lanes, in registers.
        var inclusive = votes;
        for (var d = 1u; d < lanes; d <<= 1u) {
            let up = subgroupShuffleUp(inclusive, d);
            if lane >= d {
                inclusive += up;
            }
        }
        let totals = unpack_bytes(subgroupAdd(votes));
        let base = reserve_output(view, lane, lid, totals.x + totals.y + totals.z + totals.w);
        let slots = vec4<u32>(base) + row_offsets(totals) + unpack_bytes(inclusive - votes);
        emit_items(view, items, keep, slots);
    }
}
