// bevy_gpu_cull's instance fetch, importable by custom draw shaders:
// group 2 holds the batch's instance records and the view's survivors (the
// indices the cull wrote, in draw order); `instance_index` of an indirect
// draw counts survivors. Group 2's binding 0 is Bevy's own `mesh` array
// (`bevy_pbr::mesh_bindings`) with one entry for the whole batch, so that a
// `Material`'s fragment shader written for Bevy's meshes finds the batch's
// flags and material slot at `mesh[in.instance_index]`; the plugin's own
// bindings start at 10.
#define_import_path bevy_gpu_cull::instance

#import bevy_pbr::mesh_view_bindings::view

// bevy_gpu_cull::CulledInstance: 64 bytes.
struct CulledInstance {
    position_scale: vec4<f32>,
    rotation: vec4<f32>,
    color: vec4<f32>,
    // The application's own data (CulledInstance::user).
    user: vec4<u32>,
}

// The batch's StandardMaterial, as the plugin passes it on
// (bevy_gpu_cull's MaterialUniform): base color (times each instance's
// color), emissive, metallic, roughness, and flags.
struct GpuCullMaterial {
    base_color: vec4<f32>,
    emissive: vec4<f32>,
    metallic: f32,
    perceptual_roughness: f32,
    flags: u32,
    // With MATERIAL_ALPHA_MASK: fragments with less alpha are discarded.
    alpha_cutoff: f32,
}

// GpuCullMaterial::flags: shade without lights.
const MATERIAL_UNLIT: u32 = 1u;
// GpuCullMaterial::flags: multiply by base_color_texture.
const MATERIAL_TEXTURED: u32 = 2u;
// GpuCullMaterial::flags: AlphaMode::Mask (see alpha_cutoff).
const MATERIAL_ALPHA_MASK: u32 = 4u;
// GpuCullMaterial::flags: perturb normals by normal_map_texture.
const MATERIAL_NORMAL_MAPPED: u32 = 8u;
// GpuCullMaterial::flags: the normal map's green channel points down.
const MATERIAL_FLIP_NORMAL_Y: u32 = 16u;
// GpuCullMaterial::flags: metallic (blue) and roughness (green) scaled by
// metallic_roughness_texture, as glTF and Bevy pack them.
const MATERIAL_METALLIC_ROUGHNESS_TEXTURED: u32 = 32u;
// GpuCullMaterial::flags: emissive scaled by emissive_texture.
const MATERIAL_EMISSIVE_TEXTURED: u32 = 64u;
// GpuCullMaterial::flags: ambient occlusion from occlusion_texture (red).
const MATERIAL_OCCLUSION_TEXTURED: u32 = 128u;

// The level of detail a draw draws (bevy_gpu_cull's level uniforms); all
// clear for a batch without levels.
struct GpuCullLevel {
    flags: u32,
    // With LEVEL_CROSS_FADE (GpuCullLod::with_cross_fade): how far above a
    // threshold, as a fraction of it, its two levels cross-fade.
    fade_width: f32,
    // The finer level's threshold: this level fades in below
    // upper * (1 + fade_width), down to upper (a huge value for the finest).
    upper: f32,
    // This level's own threshold: it fades out below lower * (1 + fade_width),
    // down to lower (0: never).
    lower: f32,
    // The batch's mesh-space sphere (center, radius) that the cull sizes
    // instances by.
    bounds: vec4<f32>,
}

// GpuCullLevel::flags: the level's mesh turns with the view instead of the
// instance (LodLevel::facing_camera): an impostor.
const LEVEL_FACING_CAMERA: u32 = 1u;
// GpuCullLevel::flags: the level cross-fades with its neighbours, dithered
// (only for the culling formats that carry the instance's scale in f32:
// the draw sizes instances as their cull does).
const LEVEL_CROSS_FADE: u32 = 2u;
// The share of a fade's width left at each end where its dither is all one
// level: the cull's lists change at the ends and its size may differ from
// the draw's by rounding, so a pixel shows one of two levels there
// whichever list the instance is in.
const FADE_MARGIN: f32 = 0.02;

@group(2) @binding(10) var<storage, read> instances: array<CulledInstance>;
@group(2) @binding(11) var<storage, read> survivors: array<u32>;
@group(2) @binding(12) var<uniform> material: GpuCullMaterial;
// The material's base color texture (a white fallback without one).
@group(2) @binding(13) var base_color_texture: texture_2d<f32>;
@group(2) @binding(14) var base_color_sampler: sampler;
// The material's tangent-space normal map (a white fallback without one).
@group(2) @binding(15) var normal_map_texture: texture_2d<f32>;
// The material's metallic-roughness, emissive and occlusion textures (white
// fallbacks without them), sampled with base_color_sampler.
@group(2) @binding(16) var metallic_roughness_texture: texture_2d<f32>;
@group(2) @binding(17) var emissive_texture: texture_2d<f32>;
@group(2) @binding(18) var occlusion_texture: texture_2d<f32>;
@group(2) @binding(19) var<uniform> level: GpuCullLevel;

// The material's metallic (x) and perceptual roughness (y) at `uv`.
fn material_metallic_roughness(uv: vec2<f32>) -> vec2<f32> {
    var mr = vec2<f32>(material.metallic, material.perceptual_roughness);
    if (material.flags & MATERIAL_METALLIC_ROUGHNESS_TEXTURED) != 0u {
        mr *= textureSample(metallic_roughness_texture, base_color_sampler, uv).bg;
    }
    return mr;
}

// The material's emissive color at `uv`.
fn material_emissive(uv: vec2<f32>) -> vec4<f32> {
    var e = material.emissive;
    if (material.flags & MATERIAL_EMISSIVE_TEXTURED) != 0u {
        e = vec4<f32>(e.rgb * textureSample(emissive_texture, base_color_sampler, uv).rgb, e.a);
    }
    return e;
}

// The material's ambient occlusion at `uv` (1: none).
fn material_occlusion(uv: vec2<f32>) -> f32 {
    if (material.flags & MATERIAL_OCCLUSION_TEXTURED) != 0u {
        return textureSample(occlusion_texture, base_color_sampler, uv).r;
    }
    return 1.0;
}

// The material's base color for an instance's color and a texture
// coordinate (the texture's when the material has one).
fn material_color(instance_color: vec4<f32>, uv: vec2<f32>) -> vec4<f32> {
    var color = material.base_color * instance_color;
    if (material.flags & MATERIAL_TEXTURED) != 0u {
        color *= textureSample(base_color_texture, base_color_sampler, uv);
    }
    return color;
}

// The world normal `n` perturbed by the material's normal map at `uv`,
// given the world tangent `t` (xyz, and the bitangent's sign in w): `n`
// itself without a normal map.
fn mapped_normal(n: vec3<f32>, t: vec4<f32>, uv: vec2<f32>) -> vec3<f32> {
    if (material.flags & MATERIAL_NORMAL_MAPPED) == 0u {
        return n;
    }
    var m = textureSample(normal_map_texture, base_color_sampler, uv).rgb * 2.0 - 1.0;
    if (material.flags & MATERIAL_FLIP_NORMAL_Y) != 0u {
        m.y = -m.y;
    }
    let b = cross(n, t.xyz) * sign(t.w);
    return normalize(t.xyz * m.x + b * m.y + n * m.z);
}

// Whether an alpha-masked material drops this fragment.
fn masked_out(color: vec4<f32>) -> bool {
    return (material.flags & MATERIAL_ALPHA_MASK) != 0u && color.a < material.alpha_cutoff;
}

// The survivor drawn as instance `instance_index`.
fn fetch_instance(instance_index: u32) -> CulledInstance {
    return instances[survivors[instance_index]];
}

// Rotates `v` by the unit quaternion `q` (x, y, z, w).
fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

// A mesh-space direction (a normal, a tangent, an offset) turned into the
// world for this instance: by its rotation, or, for a level facing the
// camera, like the view (mesh x to the view's right, y up, z toward it).
// The level's flag is uniform over the draw, so the branch costs no
// divergence.
fn instance_rotate(instance: CulledInstance, v: vec3<f32>) -> vec3<f32> {
    if (level.flags & LEVEL_FACING_CAMERA) != 0u {
        let turn = mat3x3<f32>(
            normalize(view.world_from_view[0].xyz),
            normalize(view.world_from_view[1].xyz),
            normalize(view.world_from_view[2].xyz),
        );
        return turn * v;
    }
    return rotate(instance.rotation, v);
}

// Mesh space to world space for this instance.
fn instance_to_world(instance: CulledInstance, local: vec3<f32>) -> vec3<f32> {
    return instance.position_scale.xyz + instance_rotate(instance, local * instance.position_scale.w);
}

// How far a cross-fade at threshold t has gone at size `size`: 0 at and
// below t (the coarser level's), 1 from t * (1 + fade_width) (the finer
// level's), FADE_MARGIN inside both ends.
fn fade_progress(size: f32, t: f32) -> f32 {
    let x = (size / t - 1.0) / level.fade_width;
    return clamp((x - FADE_MARGIN) / (1.0 - 2.0 * FADE_MARGIN), 0.0, 1.0);
}

// The share of the dither's pixels this instance shows in the drawn level,
// as [first, end) of a fade's progress: all of them, but within a
// cross-fade where the level fades in (the share above the fade's
// progress) or out (the share below it). Sized as the cull sizes it for the
// view that chose the level (cull_core::SizeMetric: radius *
// |clip_from_view[1][1]| / distance, no distance in an orthographic view),
// so that two levels of one instance split its pixels between them
// exactly.
fn level_fade(instance: CulledInstance) -> vec2<f32> {
    if (level.flags & LEVEL_CROSS_FADE) == 0u {
        return vec2<f32>(0.0, 2.0);
    }
    // In the cull's order of operations (cull::formats::posquat: rotate,
    // then scale, then add), so that far from the world's origin both round
    // the center alike rather than an ulp of the position apart.
    let scale = instance.position_scale.w;
    let center = instance.position_scale.xyz + rotate(instance.rotation, level.bounds.xyz) * scale;
    let perspective = view.clip_from_view[3].w == 0.0;
    let distance = select(1.0, length(center - view.world_position), perspective);
    // A rotation of length != 1 stretches the mesh; the cull bounds it so.
    let stretch = max(2.0 * dot(instance.rotation, instance.rotation) - 1.0, 1.0);
    let size = level.bounds.w * abs(scale) * stretch * abs(view.clip_from_view[1].y) / distance;
    // A NaN size (a sphere of radius 0 around the camera) keeps every pixel,
    // as an infinite one (the camera inside the sphere) does in the finest
    // level, which no finer level fades out of.
    if size != size {
        return vec2<f32>(0.0, 2.0);
    }
    let first = select(fade_progress(size, level.upper), 0.0, level.upper > 3.0e38);
    let end = select(fade_progress(size, level.lower), 2.0, level.lower == 0.0);
    return vec2<f32>(first, end);
}

// The instance's dither level in the drawn level, as Bevy's visibility
// ranges take it (`VertexOutput::visibility_range_dither`, applied by
// `bevy_pbr::pbr_functions::visibility_range_dither` under the
// VISIBILITY_RANGE_DITHER shader def): 0 shows every pixel, 16 or -16 none;
// a level fading out keeps the pixels of Bevy's 4x4 pattern whose
// threshold is below its share (16 - level), the level fading in keeps the
// others (threshold >= -level). Both levels of an instance round the same
// progress, so they split its pixels with none left to neither, in the
// main pass and the prepasses alike. Where two fades overlap (thresholds
// closer than the fade's width) a level is drawn whole: more, never less.
fn level_dither(instance: CulledInstance) -> i32 {
    let fade = level_fade(instance);
    let fading_out = fade.y < 1.0;
    let fading_in = fade.x > 0.0;
    if fading_out && !fading_in {
        return 16 - i32(round(fade.y * 16.0));
    }
    if fading_in && !fading_out {
        return -i32(round(fade.x * 16.0));
    }
    return 0;
}
