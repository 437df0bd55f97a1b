// The `custom_material` example's extension of `StandardMaterial`: Bevy's
// PBR lighting of the rock, plus glowing veins (horizontal bands in world
// space) in the color of each rock's ore. Written as for Bevy's meshes:
// bevy-gpu-cull runs it behind its instance-fetching vertex shader, with
// each instance's color as `in.color` (which
// `pbr_input_from_standard_material` multiplies into the base color) and
// its index in the batch at location 15, which `get_instance_user` takes
// (as Bevy's `get_tag` takes a mesh's instance index). Bevy compiles the
// same shader for ordinary meshes (and for the batch entity's own mesh,
// which it does not draw): the instance's data is read where the plugin
// defines GPU_CULL_BATCH, and a mesh's veins take the first ore's color.

#import bevy_pbr::{
    forward_io::{VertexOutput, FragmentOutput},
    pbr_fragment::pbr_input_from_standard_material,
    pbr_functions::{alpha_discard, apply_pbr_lighting, main_pass_post_lighting_processing},
}
#ifdef GPU_CULL_BATCH
#import bevy_gpu_cull::instance::get_instance_user
#endif

// `GlowingVeins::colors`: the veins' emitted color for each kind of ore.
@group(#{MATERIAL_BIND_GROUP}) @binding(100) var<uniform> vein_colors: array<vec4<f32>, 2>;
// `GlowingVeins::spacing_width`: x the distance between veins, y the
// fraction of it a vein covers.
@group(#{MATERIAL_BIND_GROUP}) @binding(101) var<uniform> vein_spacing_width: vec4<f32>;

@fragment
fn fragment(
    in: VertexOutput,
    @builtin(front_facing) is_front: bool,
#ifdef GPU_CULL_BATCH
    // The drawn instance's index in its batch (bevy_gpu_cull::forward_io).
    @location(15) @interpolate(flat) instance_record: u32,
#endif
) -> FragmentOutput {
    var pbr_input = pbr_input_from_standard_material(in, is_front);
    pbr_input.material.base_color = alpha_discard(pbr_input.material, pbr_input.material.base_color);
    var color = apply_pbr_lighting(pbr_input);
    // GpuCullInstance::user[0]: the rock's ore, 0 for none.
#ifdef GPU_CULL_BATCH
    let ore = get_instance_user(instance_record).x;
#else
    let ore = 1u;
#endif
    if ore != 0u && fract(in.world_position.y / vein_spacing_width.x) < vein_spacing_width.y {
        color = vec4<f32>(color.rgb + vein_colors[min(ore, 2u) - 1u].rgb, color.a);
    }
    var out: FragmentOutput;
    out.color = main_pass_post_lighting_processing(pbr_input, color);
    return out;
}
