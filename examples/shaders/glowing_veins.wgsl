// The `custom_material` example's extension of `StandardMaterial`: Bevy's
// PBR lighting of the rock, plus glowing veins (horizontal bands in world
// space). Written for Bevy's meshes: bevy-gpu-cull runs it unchanged behind
// its instance-fetching vertex shader, with each instance's color as
// `in.color` (which `pbr_input_from_standard_material` multiplies into the
// base color).

#import bevy_pbr::{
    forward_io::{VertexOutput, FragmentOutput},
    pbr_fragment::pbr_input_from_standard_material,
    pbr_functions::{alpha_discard, apply_pbr_lighting, main_pass_post_lighting_processing},
}

// `GlowingVeins::color`: the veins' emitted color.
@group(#{MATERIAL_BIND_GROUP}) @binding(100) var<uniform> vein_color: vec4<f32>;
// `GlowingVeins::spacing_width`: x the distance between veins, y the
// fraction of it a vein covers.
@group(#{MATERIAL_BIND_GROUP}) @binding(101) var<uniform> vein_spacing_width: vec4<f32>;

@fragment
fn fragment(in: VertexOutput, @builtin(front_facing) is_front: bool) -> FragmentOutput {
    var pbr_input = pbr_input_from_standard_material(in, is_front);
    pbr_input.material.base_color = alpha_discard(pbr_input.material, pbr_input.material.base_color);
    var color = apply_pbr_lighting(pbr_input);
    if fract(in.world_position.y / vein_spacing_width.x) < vein_spacing_width.y {
        color = vec4<f32>(color.rgb + vein_color.rgb, color.a);
    }
    var out: FragmentOutput;
    out.color = main_pass_post_lighting_processing(pbr_input, color);
    return out;
}
