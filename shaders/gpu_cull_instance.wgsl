// bevy_gpu_cull's instance fetch, importable by custom draw shaders:
// group 2 holds the batch's instance records and the view's survivors (the
// indices the cull wrote); `instance_index` of an indirect draw counts
// survivors, which the fetch functions below take in the spread order of
// bevy_gpu_cull::draw_order (vertex stage only: binding 21 is its alone). Group 2's binding 0 is Bevy's own `mesh` array
// (`bevy_pbr::mesh_bindings`) with one entry for the whole batch (one per
// batch where batches are drawn together, `batch_member`), so that a
// `Material`'s fragment shader written for Bevy's meshes finds the batch's
// flags and material slot at `mesh[in.instance_index]`; the plugin's own
// bindings start at 10.
#define_import_path bevy_gpu_cull::instance

#import bevy_pbr::mesh_view_bindings::view
#import bevy_pbr::mesh_bindings::mesh
#import bevy_pbr::mesh_types::MESH_FLAGS_SIGN_DETERMINANT_MODEL_3X3_BIT
#import bevy_pbr::mesh_functions::{mesh_normal_local_to_world, mesh_tangent_local_to_world}
#import bevy_render::maths::{affine3_to_square, mat2x4_f32_to_mat3x3_unpack}

#import bevy_gpu_cull::types::GpuCullInstance
#import bevy_gpu_cull::draw_order::spread_draw_order

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
    // The batches drawn in this draw: 1 for a batch drawn on its own, more
    // for batches drawn together (one mesh, transform and bindless material
    // kind), whose lists are one after another in `instances`.
    member_count: u32,
    // Each member's first instance in `instances`, ascending, four to an
    // element.
    member_starts: array<vec4<u32>, 8>,
}

// GpuCullLevel::flags: the level's mesh turns with the view instead of the
// instance (GpuCullLodLevel::facing_camera): an impostor.
const LEVEL_FACING_CAMERA: u32 = 1u;
// GpuCullLevel::flags: the level cross-fades with its neighbours, dithered
// (only for the culling formats that carry the instance's scale in f32:
// the draw sizes instances as their cull does).
const LEVEL_CROSS_FADE: u32 = 2u;
// GpuCullLevel::flags: the batch's transform is the identity, this frame
// and last (its instances are in world space): the vertex stage skips
// applying it (a branch uniform over the draw).
const LEVEL_BATCH_IN_WORLD: u32 = 4u;
// The share of a fade's width left at each end where its dither is all one
// level: the cull's lists change at the ends and its size may differ from
// the draw's by rounding, so a pixel shows one of two levels there
// whichever list the instance is in.
const FADE_MARGIN: f32 = 0.02;

@group(2) @binding(10) var<storage, read> instances: array<GpuCullInstance>;
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
// Last frame's records, for motion vectors: a copy made after last frame's
// draws for a batch with GpuCullMotionVectors, else the records themselves
// (the instances' own motion is then none).
@group(2) @binding(20) var<storage, read> previous_instances: array<GpuCullInstance>;
// The drawn list's indirect draw arguments, up to and including its
// instance count (the last word): how many survivors the draw draws.
@group(2) @binding(21) var<storage, read> drawn_args: array<u32>;

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

// How many survivors the draw draws (its indirect instance count).
fn drawn_count() -> u32 {
    return drawn_args[arrayLength(&drawn_args) - 1u];
}

// The place in the survivors' list of the one drawn as instance
// `instance_index`: spread over the list (bevy_gpu_cull::draw_order), or
// the list's own order in a draw that blends (the plugin defines
// GPU_CULL_DRAW_IN_ORDER for it).
fn drawn_survivor(instance_index: u32) -> u32 {
#ifdef GPU_CULL_DRAW_IN_ORDER
    return instance_index;
#else
    return spread_draw_order(instance_index, drawn_count());
#endif
}

// The record of the survivor drawn as instance `instance_index`: what
// `get_instance_color` and `get_instance_user` take (its index in the
// batch's list, or in the cells' order for a batch with GpuCullCells; for
// batches drawn together, in their lists one after another).
fn fetch_record(instance_index: u32) -> u32 {
    return survivors[drawn_survivor(instance_index)];
}

// The survivor drawn as instance `instance_index`.
fn fetch_instance(instance_index: u32) -> GpuCullInstance {
    return instances[fetch_record(instance_index)];
}

// The survivor drawn as instance `instance_index`, as it was last frame.
fn fetch_previous_instance(instance_index: u32) -> GpuCullInstance {
    return previous_instances[fetch_record(instance_index)];
}

// The member of the batches drawn together that the instance `record`
// belongs to: its entry in Bevy's `mesh` array (its material's slot), which
// the vertex stage passes on as the `instance_index` a material's fragment
// shader reads `mesh` at. 0 for a batch drawn on its own.
fn batch_member(record: u32) -> u32 {
    var low = 0u;
    var high = level.member_count;
    while low + 1u < high {
        let middle = (low + high) / 2u;
        if level.member_starts[middle / 4u][middle % 4u] <= record {
            low = middle;
        } else {
            high = middle;
        }
    }
    return low;
}

// The color of the batch's instance `record` (`GpuCullInstance::color`),
// for a material's shaders: the main pass passes `record` to the fragment
// stage as `instance_record` (bevy_gpu_cull::forward_io::VertexOutput),
// as Bevy's `mesh_functions::get_tag` takes a mesh's `instance_index`.
fn get_instance_color(record: u32) -> vec4<f32> {
    return instances[record].color;
}

// The user data of the batch's instance `record` (`GpuCullInstance::user`).
fn get_instance_user(record: u32) -> vec4<u32> {
    return instances[record].user;
}

// Rotates `v` by the unit quaternion `q` (x, y, z, w).
fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

// The view's orientation in the world (mesh x to the view's right, y up,
// z toward it): how a level facing the camera is turned.
fn view_turn() -> mat3x3<f32> {
    return mat3x3<f32>(
        normalize(view.world_from_view[0].xyz),
        normalize(view.world_from_view[1].xyz),
        normalize(view.world_from_view[2].xyz),
    );
}

// Whether the drawn level faces the camera (GpuCullLodLevel::facing_camera). The
// level's flag is uniform over the draw, so branches on it cost no
// divergence.
fn level_faces_camera() -> bool {
    return (level.flags & LEVEL_FACING_CAMERA) != 0u;
}

// A mesh-space direction (an offset) turned by this instance's rotation
// into the batch's space, or, for a level facing the camera, like the view
// (in the world). For normals and tangents in the world, take
// instance_normal_to_world and instance_tangent_to_world, which apply the
// batch's transform too.
fn instance_rotate(instance: GpuCullInstance, v: vec3<f32>) -> vec3<f32> {
    if level_faces_camera() {
        return view_turn() * v;
    }
    return rotate(instance.rotation, v);
}

// Whether the batch's transform is the identity (LEVEL_BATCH_IN_WORLD).
fn batch_in_world() -> bool {
    return (level.flags & LEVEL_BATCH_IN_WORLD) != 0u;
}

// The batch entity's transform (its GlobalTransform, entry 0 of Bevy's
// `mesh` array): instances are placed relative to it, as a mesh's vertices
// are relative to its entity.
fn batch_world_from_local() -> mat4x4<f32> {
    return affine3_to_square(mesh[0].world_from_local);
}

// The batch entity's transform last frame (for motion vectors).
fn batch_previous_world_from_local() -> mat4x4<f32> {
    return affine3_to_square(mesh[0].previous_world_from_local);
}

// -1 for an instance with a negative scale (a mirror image), else 1.
fn instance_handedness(instance: GpuCullInstance) -> f32 {
    return select(1.0, -1.0, instance.position_scale.w < 0.0);
}

// Whether the batch's transform mirrors (its determinant is negative).
fn batch_mirrors() -> bool {
    if batch_in_world() {
        return false;
    }
    return (mesh[0].flags & MESH_FLAGS_SIGN_DETERMINANT_MODEL_3X3_BIT) == 0u;
}

// Whether this instance's triangles wind the other way round on screen: a
// mirror image (negative scale) in a batch that does not mirror, or an
// instance that is not one in a batch that does. Such instances are drawn
// with the opposite front face, so that back faces are culled and lit as
// on a mesh.
fn instance_winds_backwards(instance: GpuCullInstance) -> bool {
    return (instance.position_scale.w < 0.0) != batch_mirrors();
}

// Whether this main-pass draw leaves the instance to the batch's other one:
// a batch with instances of both windings is drawn twice, once with each
// front face (the plugin defines GPU_CULL_FLIPPED_WINDING for the draw
// whose front face is clockwise), each keeping the instances that wind its
// way. A custom draw shader should drop such instances too (see
// `skipped_position`).
fn drawn_by_other_winding(instance: GpuCullInstance) -> bool {
#ifdef GPU_CULL_FLIPPED_WINDING
    return !instance_winds_backwards(instance);
#else
    return instance_winds_backwards(instance);
#endif
}

// A clip position for every vertex of a skipped instance: its triangles
// collapse to a point outside the view and draw nothing.
fn skipped_position() -> vec4<f32> {
    return vec4<f32>(0.0, 0.0, -1.0, 1.0);
}

// The mirror a level facing the camera takes for an instance that winds
// backwards (across the view's vertical axis), so that the impostor winds
// as the instance does and the draw of its winding keeps it.
fn facing_mirror(instance: GpuCullInstance) -> vec3<f32> {
    return vec3<f32>(select(1.0, -1.0, instance_winds_backwards(instance)), 1.0, 1.0);
}

// Mesh space to the batch's space for this instance: rotated, scaled,
// placed.
fn instance_to_local(instance: GpuCullInstance, v: vec3<f32>) -> vec3<f32> {
    return instance.position_scale.xyz + rotate(instance.rotation, v * instance.position_scale.w);
}

// Mesh space to world space for this instance under the batch transform
// `world_from_local` (this frame's or last frame's). A level facing the
// camera is turned in the world, sized by the instance's scale and the
// batch's shortest axis (so that it stays within the sphere the cull
// tests).
fn instance_to_world_by(world_from_local: mat4x4<f32>, instance: GpuCullInstance, v: vec3<f32>) -> vec3<f32> {
    if level_faces_camera() {
        let m = world_from_local;
        let center = (m * vec4<f32>(instance.position_scale.xyz, 1.0)).xyz;
        let shortest = min(length(m[0].xyz), min(length(m[1].xyz), length(m[2].xyz)));
        return center + view_turn() * (v * facing_mirror(instance) * abs(instance.position_scale.w) * shortest);
    }
    if batch_in_world() {
        return instance_to_local(instance, v);
    }
    return (world_from_local * vec4<f32>(instance_to_local(instance, v), 1.0)).xyz;
}

// Mesh space to world space for this instance: its own transform, then the
// batch's.
fn instance_to_world(instance: GpuCullInstance, v: vec3<f32>) -> vec3<f32> {
    return instance_to_world_by(batch_world_from_local(), instance, v);
}

// Where this vertex was last frame, given the instance as it was last
// frame (fetch_previous_instance) and the batch's transform last frame.
fn instance_to_previous_world(previous: GpuCullInstance, v: vec3<f32>) -> vec3<f32> {
    return instance_to_world_by(batch_previous_world_from_local(), previous, v);
}

// A mesh-space normal in the world for this instance: turned by its
// rotation (and reversed for a mirror image), then by the batch's
// transform as Bevy turns a mesh's normals, normalized.
fn instance_normal_to_world(instance: GpuCullInstance, n: vec3<f32>) -> vec3<f32> {
    if level_faces_camera() {
        return view_turn() * (n * facing_mirror(instance));
    }
    let local = rotate(instance.rotation, n) * instance_handedness(instance);
    if batch_in_world() {
        return local;
    }
    return mesh_normal_local_to_world(local, 0u);
}

// A mesh-space tangent (xyz, and the bitangent's sign in w) in the world
// for this instance, as Bevy turns a mesh's (the sign flipped for a mirror
// image, and again for a mirroring batch transform).
fn instance_tangent_to_world(instance: GpuCullInstance, t: vec4<f32>) -> vec4<f32> {
    if level_faces_camera() {
        let mirror = facing_mirror(instance);
        return vec4<f32>(view_turn() * (t.xyz * mirror), t.w * mirror.x);
    }
    let h = instance_handedness(instance);
    let local = vec4<f32>(rotate(instance.rotation, t.xyz) * h, t.w * h);
    if batch_in_world() {
        return local;
    }
    return mesh_tangent_local_to_world(batch_world_from_local(), local, 0u);
}

// The camera's position in the batch's space, where the cull measures the
// size of levels of detail (cull_core::LocalFrame::size_metric).
fn batch_view_position() -> vec3<f32> {
    if batch_in_world() {
        return view.world_position;
    }
    let local_from_world = transpose(mat2x4_f32_to_mat3x3_unpack(
        mesh[0].local_from_world_transpose_a,
        mesh[0].local_from_world_transpose_b,
    ));
    return local_from_world * (view.world_position - batch_world_from_local()[3].xyz);
}

// How much larger sizes look in the world than measured in the batch's
// space, as the cull takes it: the longest axis over the shortest for a
// perspective view, the longest axis for an orthographic one.
fn batch_size_stretch(perspective: bool) -> f32 {
    if batch_in_world() {
        return 1.0;
    }
    let m = batch_world_from_local();
    let lengths = vec3<f32>(length(m[0].xyz), length(m[1].xyz), length(m[2].xyz));
    let longest = max(lengths.x, max(lengths.y, lengths.z));
    let shortest = min(lengths.x, min(lengths.y, lengths.z));
    return select(longest, longest / shortest, perspective);
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
// view that chose the level, in the batch's space
// (cull_core::LocalFrame::size_metric: radius * |clip_from_view[1][1]| *
// the batch's stretch / distance, no distance in an orthographic view),
// so that two levels of one instance split its pixels between them
// exactly.
fn level_fade(instance: GpuCullInstance) -> vec2<f32> {
    if (level.flags & LEVEL_CROSS_FADE) == 0u {
        return vec2<f32>(0.0, 2.0);
    }
    // In the cull's order of operations (cull::formats::posquat: rotate,
    // then scale, then add), so that far from the world's origin both round
    // the center alike rather than an ulp of the position apart.
    let scale = instance.position_scale.w;
    let center = instance.position_scale.xyz + rotate(instance.rotation, level.bounds.xyz) * scale;
    let perspective = view.clip_from_view[3].w == 0.0;
    let distance = select(1.0, length(center - batch_view_position()), perspective);
    // A rotation of length != 1 stretches the mesh; the cull bounds it so.
    let stretch = max(2.0 * dot(instance.rotation, instance.rotation) - 1.0, 1.0);
    let projection = abs(view.clip_from_view[1].y) * batch_size_stretch(perspective);
    let size = level.bounds.w * abs(scale) * stretch * projection / distance;
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
fn level_dither(instance: GpuCullInstance) -> i32 {
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
