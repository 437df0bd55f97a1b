// Writing a batch's instances from a compute pass of the application's
// (bevy_gpu_cull::GpuCullComputeWrites): group 0 is the batch's bind group
// from bevy_gpu_cull::GpuCullInstanceBuffers (the pass's own resources go
// in groups 1 and up). Write instances only through write_instance, which
// writes each one as the draw reads it and in the culler's format (the
// format may change at run time; the branch on it is uniform), and the
// count only through set_instance_count or add_instances.
#define_import_path bevy_gpu_cull::gpu_writes

#import bevy_gpu_cull::types::GpuCullInstance
#import cull::encode::{encode_instance, culled_part, unit_rotation}

// The batch's header (bevy_gpu_cull's GpuWritesHeader).
struct GpuCullBatchHeader {
    // Instances the batch holds (those at and past it are not drawn); may
    // exceed the capacity after add_instances, read it with instance_count.
    count: atomic<u32>,
    // The most it can hold: the records' and the cull input's length.
    capacity: u32,
    // The culler's format (cull_core::InstanceFormat::encode_id) and its
    // 16-byte parts per instance.
    format: u32,
    parts: u32,
    // The scales an instance may have (GpuCullComputeWrites::scales).
    min_scale: f32,
    max_scale: f32,
}

@group(0) @binding(0) var<storage, read_write> gpu_cull_records: array<GpuCullInstance>;
@group(0) @binding(1) var<storage, read_write> gpu_cull_header: GpuCullBatchHeader;
@group(0) @binding(2) var<storage, read_write> gpu_cull_input: array<vec4<u32>>;

// The most instances the batch holds.
fn instance_capacity() -> u32 {
    return gpu_cull_header.capacity;
}

// Instances the batch holds now.
fn instance_count() -> u32 {
    return min(atomicLoad(&gpu_cull_header.count), gpu_cull_header.capacity);
}

// Sets the instance count (at most the capacity). Instances at and past
// it are not drawn; those below it that were never written hold whatever
// their slots last held.
fn set_instance_count(count: u32) {
    atomicStore(&gpu_cull_header.count, min(count, gpu_cull_header.capacity));
}

// Reserves `n` instances at the end: the index of the first, or a value
// at or past instance_capacity() where they do not all fit (then none of
// them may be written).
fn add_instances(n: u32) -> u32 {
    let first = atomicAdd(&gpu_cull_header.count, n);
    if first + n > gpu_cull_header.capacity {
        return gpu_cull_header.capacity;
    }
    return first;
}

// The instance at `index`, as last written.
fn read_instance(index: u32) -> GpuCullInstance {
    return gpu_cull_records[index];
}

// An instance at `position` with `scale`, `rotation` (any non-zero
// length) and linear `color`, its user data zero.
fn culled_instance(position: vec3<f32>, scale: f32, rotation: vec4<f32>, color: vec4<f32>) -> GpuCullInstance {
    return GpuCullInstance(vec4<f32>(position, scale), rotation, color, vec4<u32>(0u));
}

// Writes the instance at `index` (below instance_capacity()): its record
// for the draw, its rotation normalized, and its transform in the culler's
// format. An instance with a non-finite or zero rotation, a non-finite
// position, or a scale outside the batch's scales is culled: not drawn.
fn write_instance(index: u32, instance: GpuCullInstance) {
    if index >= gpu_cull_header.capacity {
        return;
    }
    var record = instance;
    record.rotation = unit_rotation(instance.rotation);
    gpu_cull_records[index] = record;
    let scale = instance.position_scale.w;
    let encoded = encode_instance(gpu_cull_header.format, instance.position_scale.xyz, scale, record.rotation);
    let first = index * gpu_cull_header.parts;
    for (var k = 0u; k < encoded.count; k++) {
        gpu_cull_input[first + k] = encoded.parts[k];
    }
    if !(scale >= gpu_cull_header.min_scale && scale <= gpu_cull_header.max_scale) {
        gpu_cull_input[first] = culled_part();
    }
}
