// Cell culling's first pass (cull::cells), one thread per cell: an entry
// module of its own, composed with the cull's shader defs (its visibility
// test's among them), beside the variant's entry module.

#import cull::cells::vote_cell
#ifdef ORDERED_CELL_LIST
#import cull::cells::{list_kept_cells, LIST_WORKGROUP}
#endif

@compute @workgroup_size(64)
fn cull_cells(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    vote_cell((wid.y * groups.x + wid.x) * 64u + lid);
}

#ifdef ORDERED_CELL_LIST
// The ordered variant's list pass: one workgroup per chunk.
@compute @workgroup_size(LIST_WORKGROUP)
fn list_cells(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    list_kept_cells(wid.x, lid);
}
#endif
