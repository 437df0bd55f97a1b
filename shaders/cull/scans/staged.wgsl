// Index output staged in workgroup memory (STAGED_INDICES, cull_core's
// Tuning::staged_indices): before the reservation's barriers each lane
// writes the indices it keeps in a view to that view's staging row, at the
// workgroup-local slot its subgroup's range and its rank give; after them
// the workgroup writes the row out, invocation k taking slots k,
// k + WORKGROUP_SIZE, ...: whole rows of consecutive slots, the same slots
// the lanes' own stores would take. A lane's own store to a view's list,
// under a branch per item and view with its 64-bit address and bounds
// check, was most of a view's instructions besides the vote; a store
// to workgroup memory is a fraction of that (what staging saved:
// docs/benchmarks.md#several-views-in-one-pass), and the ranks need no
// registers across the barriers. Views go in pairs: two rows of a tile
// each (8 KiB at the largest tile, within WebGPU's 16 KiB of workgroup
// memory): rows for four views (16 KiB) made four views a third slower on
// an NVIDIA H200, as if fewer workgroups fit on a multiprocessor.
#define_import_path cull::scans::staged

#import cull::params::{TILE, WORKGROUP_SIZE, VIEWS}
#import cull::items::emit_reading
#import cull::scans::reserve::{workgroup_count, view_bases, reserve_views}

// Views staged at once: a pair, or one for a one-view kernel.
const STAGED_VIEWS: u32 = #{STAGED_VIEWS}u;

var<workgroup> staged: array<array<u32, TILE>, STAGED_VIEWS>;

// Zeroes the workgroup's survivor counts: a kernel that stages its output
// is compiled without wgpu's zeroing of workgroup memory, which for the
// staging rows would cost more than using them (on backends where it is a
// polyfill, one invocation stores every word). Every invocation calls it,
// once, before any count is taken.
fn clear_counts(lid: u32) {
    if lid < VIEWS {
        atomicStore(&workgroup_count[lid], 0u);
    }
    workgroupBarrier();
}

// Stages the kept ones of a thread's four items (chunk-local `index`) at
// `slots` of `view`'s row (workgroup-local slots: the subgroup's first slot
// plus the items' ranks).
fn stage_items(view: u32, keep: vec4<bool>, index: vec4<u32>, slots: vec4<u32>) {
    let row = view % STAGED_VIEWS;
    if keep.x { staged[row][slots.x] = index.x; }
    if keep.y { staged[row][slots.y] = index.y; }
    if keep.z { staged[row][slots.z] = index.z; }
    if keep.w { staged[row][slots.w] = index.w; }
}

// Writes `view`'s staged survivors to its list, after the reservation
// (cull::scans::reserve::reserve_views) made the row and the view's range
// visible to every invocation.
fn emit_staged(view: u32, lid: u32) {
    let row = view % STAGED_VIEWS;
    let count = atomicLoad(&workgroup_count[view]);
    let base = view_bases[view];
    for (var k = lid; k < count; k += WORKGROUP_SIZE) {
        emit_reading(view, base + k, staged[row][k]);
    }
}

// Reserves the ranges of the pair of views from `first` (one view where
// the kernel has no more) and writes their staged survivors. Every
// invocation calls it, after staging the pair.
fn write_pair(first: u32, lid: u32) {
    reserve_views(lid, first, STAGED_VIEWS);
    emit_staged(first, lid);
    if first + 1u < VIEWS {
        emit_staged(first + 1u, lid);
    }
}
