// bevy_gpu_cull's record of one instance, as the draw reads it
// (bevy_gpu_cull::GpuCullInstance, 64 bytes): imported by the draw's
// instance fetch (bevy_gpu_cull::instance) and by compute passes that
// write instances (bevy_gpu_cull::gpu_writes). No bindings.
#define_import_path bevy_gpu_cull::types

struct GpuCullInstance {
    // Position in the batch's space, and the uniform scale (negative: a
    // mirror image).
    position_scale: vec4<f32>,
    // Rotation quaternion (x, y, z, w), unit length.
    rotation: vec4<f32>,
    // Linear RGBA, multiplied into the material's base color.
    color: vec4<f32>,
    // The application's own data (GpuCullInstance::user).
    user: vec4<u32>,
}
