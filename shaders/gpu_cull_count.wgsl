// The plugin's pass after the application's writes of a batch written on
// the GPU (bevy_gpu_cull::GpuCullComputeWrites): every instance at and past
// the batch's count is marked culled in the cull's input, so that a count
// the GPU lowered leaves nothing behind. Group 0 as the application's.

#import bevy_gpu_cull::gpu_writes::{gpu_cull_input, instance_count, instance_capacity, gpu_cull_header}
#import cull::encode::culled_part

@compute @workgroup_size(64)
fn mark_past_count(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let index = id.y * groups.x * 64u + id.x;
    if index >= instance_capacity() || index < instance_count() {
        return;
    }
    gpu_cull_input[index * gpu_cull_header.parts] = culled_part();
}
