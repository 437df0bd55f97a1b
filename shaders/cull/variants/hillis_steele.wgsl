// Hillis-Steele: the naive multi-pass baseline. vote writes one u32 per
// instance; each scan step is its own dispatch adding the element
// `scan_offset` places back (log2 N dispatches, each re-reading the whole
// array); compact writes survivors at base + exclusive prefix; finalize adds
// the chunk's total to the running count. Order is preserved. Several
// views are culled one after the other, each pass reading the view
// params.first_view (the baseline re-reads the instances per view).
// Culled by cells (cull::cells, with KEPT_CELL_FLAGS), the vote pass reads
// no instance of a culled cell: their votes are 0.

#import cull::params::{params, WORKGROUP_SIZE, workgroup_index}
#import cull::items::{draw_args, count_word, vote, emit_reading}
#ifdef CELLS
#import cull::params::{TILE, tile_kept}
#endif

@group(0) @binding(#{BINDING_VOTES}) var<storage, read_write> votes: array<u32>;
@group(0) @binding(#{BINDING_SCAN_IN}) var<storage, read> scan_in: array<u32>;
@group(0) @binding(#{BINDING_SCAN_OUT}) var<storage, read_write> scan_out: array<u32>;

fn thread_index(wid: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid) * WORKGROUP_SIZE + lid;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn vote_pass(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = thread_index(wid, lid);
    if i < params.chunk_len {
        let v = select(0u, 1u, kept_vote(i));
        votes[i] = v;
        scan_out[i] = v;
    }
}

// Chunk-local instance `i`'s vote (by cells: false in a culled cell, unread).
fn kept_vote(i: u32) -> bool {
#ifdef CELLS
    if !tile_kept(i / TILE) {
        return false;
    }
#endif
    return vote(i, params.first_view);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn scan_step(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = thread_index(wid, lid);
    if i < params.chunk_len {
        var sum = scan_in[i];
        if i >= params.scan_offset {
            sum += scan_in[i - params.scan_offset];
        }
        scan_out[i] = sum;
    }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn compact(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let i = thread_index(wid, lid);
    if i < params.chunk_len && votes[i] != 0u {
        // The count so far is final: earlier chunks' finalize passes ran
        // before this dispatch.
        let view = params.first_view;
        let base = atomicLoad(&draw_args[count_word(view)]);
        emit_reading(view, base + scan_in[i] - 1u, i);
    }
}

@compute @workgroup_size(1)
fn finalize() {
    if params.chunk_len > 0u {
        atomicAdd(&draw_args[count_word(params.first_view)], scan_in[params.chunk_len - 1u]);
    }
}
