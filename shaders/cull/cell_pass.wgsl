// Cell culling's first pass (cull::cells), one thread per cell: an entry
// module of its own, composed with the cull's shader defs (its visibility
// test's among them), beside the variant's entry module.

#import cull::cells::vote_cell

@compute @workgroup_size(64)
fn cull_cells(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    vote_cell((wid.y * groups.x + wid.x) * 64u + lid);
}
