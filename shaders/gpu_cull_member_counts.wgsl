// A combined batch's visible counts per member (batches drawn together,
// bevy_gpu_cull's render/merge.rs): after a view's cull, each survivor is
// counted for the member whose instances it is among, in workgroup memory
// first, then into the view's counts, which are read back beside the
// view's own count.

// The view's survivors: each an instance's index in the combined list.
@group(0) @binding(0) var<storage, read> survivors: array<u32>;
// The view's draw arguments, up to and including its instance count (the
// last word): how many survivors there are.
@group(0) @binding(1) var<storage, read> drawn_args: array<u32>;
// Each member's first instance in the combined list, ascending.
@group(0) @binding(2) var<storage, read> member_starts: array<u32>;
// The view's count per member (cleared before the pass).
@group(0) @binding(3) var<storage, read_write> member_counts: array<atomic<u32>>;

// At most bevy_gpu_cull's MAX_MEMBERS members.
const MAX_MEMBERS: u32 = 32u;

var<workgroup> local_counts: array<atomic<u32>, MAX_MEMBERS>;

// The member holding instance `index`: the last whose first instance is at
// or before it.
fn member_of(index: u32) -> u32 {
    var low = 0u;
    var high = arrayLength(&member_starts);
    while low + 1u < high {
        let middle = (low + high) / 2u;
        if member_starts[middle] <= index {
            low = middle;
        } else {
            high = middle;
        }
    }
    return low;
}

@compute @workgroup_size(256)
fn count_members(
    @builtin(global_invocation_id) id: vec3<u32>,
    @builtin(local_invocation_index) local: u32,
) {
    if local < MAX_MEMBERS {
        atomicStore(&local_counts[local], 0u);
    }
    workgroupBarrier();
    let count = drawn_args[arrayLength(&drawn_args) - 1u];
    if id.x < count {
        atomicAdd(&local_counts[member_of(survivors[id.x])], 1u);
    }
    workgroupBarrier();
    if local < arrayLength(&member_starts) {
        let counted = atomicLoad(&local_counts[local]);
        if counted != 0u {
            atomicAdd(&member_counts[local], counted);
        }
    }
}
