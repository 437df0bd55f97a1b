//! Materials: the entity's `StandardMaterial` (textures, normal map, alpha
//! mask, blending), a bindless custom `Material`, an extended standard
//! material, and a custom draw shader reading the instances' user data.

use crate::harness::*;
use bevy::prelude::*;
use bevy::render::render_resource::{AsBindGroup, TextureFormat};
use bevy_gpu_cull::prelude::*;

/// The batch's instances, all white, so that a material's color shows as
/// it is.
fn white_instances(world: &World, batch: Entity) -> Vec<GpuCullInstance> {
    world
        .get::<GpuCullInstances>(batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| i.with_color(Color::WHITE))
        .collect()
}

/// A batch entity's transform that would put an ordinary copy of its mesh
/// high in the view, where the sky is: the tests check that none appears.
fn transform_in_the_sky() -> Transform {
    Transform::from_xyz(0.0, 6.0, -30.0).with_scale(Vec3::splat(8.0))
}

/// `instances` given relative to [`transform_in_the_sky`], so that they
/// stay where they were in the world.
fn under_the_sky(instances: Vec<GpuCullInstance>) -> Vec<GpuCullInstance> {
    let sky = transform_in_the_sky();
    instances
        .into_iter()
        .map(|i| GpuCullInstance {
            position: (i.position - sky.translation) / sky.scale.x,
            scale: i.scale / sky.scale.x,
            ..i
        })
        .collect()
}

/// Issue 16: the batch entity's `StandardMaterial` shades its instances (its
/// base color texture here, tinted by each instance's white), and Bevy draws
/// no copy of the mesh at the entity's own transform.
#[test]
fn a_textured_material_shades_the_instances_and_draws_no_extra_copy() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let texture = flat_texture(world, [20, 220, 40, 255], true);
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color_texture: Some(texture),
            ..default()
        });
    let white: Vec<GpuCullInstance> = under_the_sky(white_instances(world, h.batch));
    // The entity's own transform puts a would-be copy of the mesh high in
    // the view, where the sky is: it must not appear.
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(material), transform_in_the_sky()));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(white);
    run_until_counts_match(&mut h, "textured material");
    let start = std::time::Instant::now();
    let mut green = 0;
    let mut top_green = 0;
    while start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        green = count_pixels(&padded, 0..HEIGHT as usize, is_green);
        top_green = count_pixels(&padded, 0..HEIGHT as usize / 5, is_green);
        if green > 200 {
            break;
        }
    }
    assert!(green > 200, "only {green} pixels show the texture's green");
    assert_eq!(
        top_green, 0,
        "a copy of the mesh is drawn at the entity's transform"
    );
}

/// How many of the main pass's pipelines for batches with Bevy's materials
/// pass the mesh's texture coordinates on to the fragment stage, and how
/// many leave them out.
fn main_pass_pipelines_by_texture_coordinates(app: &App) -> (usize, usize) {
    use bevy::render::render_resource::{PipelineCache, PipelineDescriptor};
    let cache = app
        .sub_app(bevy::render::RenderApp)
        .world()
        .resource::<PipelineCache>();
    let uvs = bevy::shader::ShaderDefVal::from("VERTEX_UVS_A");
    let mut counts = (0, 0);
    for pipeline in cache.pipelines() {
        let PipelineDescriptor::RenderPipelineDescriptor(descriptor) = &pipeline.descriptor else {
            continue;
        };
        // A material's `specialize` may prefix the label (Bevy's
        // `StandardMaterial` makes it `pbr_gpu_cull_material`).
        if !descriptor
            .label
            .as_deref()
            .is_some_and(|l| l.ends_with("gpu_cull_material"))
        {
            continue;
        }
        let fragment_reads = descriptor
            .fragment
            .as_ref()
            .is_some_and(|f| f.shader_defs.contains(&uvs));
        let vertex_passes = descriptor.vertex.shader_defs.contains(&uvs);
        assert_eq!(
            fragment_reads, vertex_passes,
            "the stages disagree on texture coordinates"
        );
        let fetched = descriptor
            .vertex
            .buffers
            .iter()
            .any(|b| b.attributes.iter().any(|a| a.shader_location == 2));
        assert_eq!(
            fetched, vertex_passes,
            "coordinates fetched but not passed on, or the other way round"
        );
        if vertex_passes {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    counts
}

/// A `StandardMaterial` without textures is drawn without the mesh's
/// texture coordinates in the main pass's vertex output (Bevy's PBR
/// fragment shader reads them only to sample textures); a texture added to
/// the same material at run time brings them back, and shows.
#[test]
fn texture_coordinates_are_passed_on_only_while_the_material_has_a_texture() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::default());
    let white = white_instances(world, h.batch);
    world.entity_mut(h.batch).insert(MeshMaterial3d(material.clone()));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(white);
    run_until_counts_match(&mut h, "material without textures");
    let start = std::time::Instant::now();
    while h.app.world().resource::<GpuCullStats>().drawn_frames < 3 && start.elapsed() < SETTLE {
        h.app.update();
    }
    let (with, without) = main_pass_pipelines_by_texture_coordinates(&h.app);
    assert!(
        with == 0 && without > 0,
        "{with} main pass pipelines pass texture coordinates on, {without} leave them out"
    );
    let world = h.app.world_mut();
    let texture = flat_texture(world, [20, 220, 40, 255], true);
    world
        .resource_mut::<Assets<StandardMaterial>>()
        .get_mut(&material)
        .expect("the material")
        .base_color_texture = Some(texture);
    let start = std::time::Instant::now();
    let mut green = 0;
    while start.elapsed() < SETTLE && green <= 200 {
        h.app.update();
        if let Some(padded) = h.pixels.lock().unwrap().clone() {
            green = count_pixels(&padded, 0..HEIGHT as usize, is_green);
        }
    }
    assert!(
        green > 200,
        "only {green} pixels show the texture added at run time"
    );
    let (with, _) = main_pass_pipelines_by_texture_coordinates(&h.app);
    assert!(with > 0, "no main pass pipeline passes texture coordinates on");
}

/// Issue 16: an alpha-masked material (`AlphaMode::Mask`) discards what its
/// texture's alpha masks: a fully transparent texture hides the instances
/// although they are culled, counted and drawn. The same material opaque
/// shows them (an opaque batch's shader has no discard), and switching its
/// alpha mode at run time re-specializes the draw.
#[test]
fn an_alpha_masked_material_discards_masked_fragments() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let texture = flat_texture(world, [255, 255, 255, 0], true);
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color_texture: Some(texture),
            alpha_mode: AlphaMode::Opaque,
            ..default()
        });
    world.entity_mut(h.batch).insert(MeshMaterial3d(material.clone()));
    run_until_counts_match(&mut h, "opaque material");
    // The instances' pixels in the last frame read back, after `frames`
    // more frames once three were drawn.
    let shown_after = |h: &mut Harness, frames: u32| {
        let start = std::time::Instant::now();
        while h.app.world().resource::<GpuCullStats>().drawn_frames < 3 && start.elapsed() < SETTLE {
            h.app.update();
        }
        for _ in 0..frames {
            h.app.update();
        }
        assert!(
            h.app.world().resource::<GpuCullStats>().drawn_frames >= 3,
            "never drawn"
        );
        let padded = h.pixels.lock().unwrap().clone().expect("a frame was read back");
        count_pixels(&padded, 0..HEIGHT as usize, |p| p[0] as u32 > p[2] as u32 + 30)
    };
    let opaque = shown_after(&mut h, 5);
    assert!(opaque > 0, "the opaque material hides the instances");
    h.app
        .world_mut()
        .resource_mut::<Assets<StandardMaterial>>()
        .get_mut(&material)
        .expect("the material")
        .alpha_mode = AlphaMode::Mask(0.5);
    let masked = shown_after(&mut h, 10);
    assert_eq!(
        masked, 0,
        "masked instances still cover {masked} pixels (opaque: {opaque})"
    );
}

/// A bindless material of the test's own: its color times the vertex
/// color (the instance's color). Each material has its own slot in a shared
/// bind group, which its fragment shader finds in Bevy's `mesh` array.
#[derive(Asset, TypePath, AsBindGroup, Debug, Clone)]
#[uniform(0, TintUniform, binding_array(10))]
#[bindless(limit(4))]
struct TintMaterial {
    color: LinearRgba,
}

#[derive(bevy::render::render_resource::ShaderType)]
struct TintUniform {
    color: LinearRgba,
}

impl From<&TintMaterial> for TintUniform {
    fn from(material: &TintMaterial) -> Self {
        Self {
            color: material.color,
        }
    }
}

const TINT_SHADER: Handle<bevy::shader::Shader> =
    bevy::asset::uuid_handle!("5b0c1c53-0c55-4c8e-9f1e-7d0b7b4f21a1");

const TINT_SHADER_SOURCE: &str = r#"
#import bevy_pbr::{forward_io::VertexOutput, mesh_bindings::mesh}

struct Tint {
    color: vec4<f32>,
}

#ifdef BINDLESS
struct TintIndices {
    tint: u32,
}
@group(#{MATERIAL_BIND_GROUP}) @binding(0) var<storage> tint_indices: array<TintIndices>;
@group(#{MATERIAL_BIND_GROUP}) @binding(10) var<storage> tints: binding_array<Tint>;
#else
@group(#{MATERIAL_BIND_GROUP}) @binding(0) var<uniform> tint: Tint;
#endif

@fragment
fn fragment(in: VertexOutput) -> @location(0) vec4<f32> {
#ifdef BINDLESS
    let slot = mesh[in.instance_index].material_and_lightmap_bind_group_slot & 0xffffu;
    let color = tints[tint_indices[slot].tint].color;
#else
    let color = tint.color;
#endif
    return color * in.color;
}
"#;

impl Material for TintMaterial {
    fn fragment_shader() -> bevy::shader::ShaderRef {
        TINT_SHADER.into()
    }
}

/// A `StandardMaterial` extension that multiplies the unlit color by a tint.
#[derive(Asset, TypePath, AsBindGroup, Debug, Clone)]
struct TintExtension {
    #[uniform(100)]
    tint: LinearRgba,
}

const TINT_EXTENSION_SHADER: Handle<bevy::shader::Shader> =
    bevy::asset::uuid_handle!("0f6f3a0e-3d7c-4b8c-a0f4-6b1e5d2c9e77");

const TINT_EXTENSION_SOURCE: &str = r#"
#import bevy_pbr::{
    forward_io::VertexOutput,
    pbr_fragment::pbr_input_from_standard_material,
    pbr_functions::{alpha_discard, main_pass_post_lighting_processing},
}

@group(#{MATERIAL_BIND_GROUP}) @binding(100) var<uniform> tint: vec4<f32>;

@fragment
fn fragment(in: VertexOutput, @builtin(front_facing) is_front: bool) -> @location(0) vec4<f32> {
    var pbr_input = pbr_input_from_standard_material(in, is_front);
    let color = alpha_discard(pbr_input.material, pbr_input.material.base_color);
    return main_pass_post_lighting_processing(pbr_input, vec4<f32>(color.rgb * tint.rgb, color.a));
}
"#;

impl bevy::pbr::MaterialExtension for TintExtension {
    fn fragment_shader() -> bevy::shader::ShaderRef {
        TINT_EXTENSION_SHADER.into()
    }
}

/// The harness with `M`'s material plugin and the test materials' shaders.
fn material_harness<M: Material>() -> Harness
where
    M::Data: PartialEq + Eq + std::hash::Hash + Clone,
{
    let mut h = harness_with_plugins(
        None,
        &[looking_down_grid()],
        CameraSetup::PlainSynchronous,
        |app| {
            app.add_plugins(MaterialPlugin::<M>::default());
        },
    );
    let mut shaders = h.app.world_mut().resource_mut::<Assets<bevy::shader::Shader>>();
    for (handle, source, path) in [
        (&TINT_SHADER, TINT_SHADER_SOURCE, "tint_material.wgsl"),
        (
            &TINT_EXTENSION_SHADER,
            TINT_EXTENSION_SOURCE,
            "tint_extension.wgsl",
        ),
    ] {
        shaders
            .insert(handle.id(), bevy::shader::Shader::from_wgsl(source, path))
            .expect("a UUID handle always inserts");
    }
    h
}

/// Renders until `done` holds for the frame (or SETTLE passes); the last frame.
fn frame_until(h: &mut Harness, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let start = std::time::Instant::now();
    loop {
        h.app.update();
        let frame = h.pixels.lock().unwrap().clone();
        if let Some(frame) = frame
            && (done(&frame) || start.elapsed() > SETTLE)
        {
            return frame;
        }
        assert!(start.elapsed() < 2 * SETTLE, "no frame was read back");
    }
}

fn is_green(p: &[u8]) -> bool {
    p[1] > 60 && p[1] as u32 > p[0] as u32 + 40 && p[1] as u32 > p[2] as u32 + 40
}

/// Pixels of each half of the frame (left, right) that `matches`.
fn count_by_half(padded: &[u8], matches: impl Fn(&[u8]) -> bool) -> (usize, usize) {
    let mut halves = (0, 0);
    for (i, p) in frame_rows(padded, 0..HEIGHT as usize).enumerate() {
        if matches(p) {
            if i % (WIDTH as usize) < WIDTH as usize / 2 {
                halves.0 += 1;
            } else {
                halves.1 += 1;
            }
        }
    }
    halves
}

/// Issue 16: a `Material` of the application's (here a bindless one, two
/// batches sharing its bind group at different slots) shades the instances
/// through Bevy's `MaterialPlugin<M>`, with the instance color as the vertex
/// color, and no extra copy of the mesh is drawn at the entity's transform.
#[test]
fn a_custom_material_shades_the_instances() {
    let mut h = material_harness::<TintMaterial>();
    record_render_errors(&mut h.app);
    let world = h.app.world_mut();
    let mut materials = world.resource_mut::<Assets<TintMaterial>>();
    let green = materials.add(TintMaterial {
        color: LinearRgba::rgb(0.1, 1.0, 0.1),
    });
    let red = materials.add(TintMaterial {
        color: LinearRgba::rgb(1.0, 0.1, 0.1),
    });
    // The grid's left half (x < 0) is one batch, its right half another,
    // all instances white so that the material's color shows as it is.
    let all: Vec<GpuCullInstance> = under_the_sky(white_instances(world, h.batch));
    let (left, right): (Vec<_>, Vec<_>) = all.into_iter().partition(|i| i.position.x < 0.0);
    let mesh = world.get::<Mesh3d>(h.batch).unwrap().clone();
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(green), transform_in_the_sky()));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(left);
    let right = world
        .spawn((
            mesh,
            GpuCullInstances::new(right),
            MeshMaterial3d(red),
            transform_in_the_sky(),
        ))
        .id();
    run_until_counts_match(&mut h, "custom material");
    let frame = frame_until(&mut h, |f| {
        let (green, red) = (count_by_half(f, is_green), count_by_half(f, is_red));
        green.0 > 100 && red.1 > 100
    });
    let (green, red) = (count_by_half(&frame, is_green), count_by_half(&frame, is_red));
    assert!(
        green.0 > 100 && red.1 > 100,
        "the left batch shows {} green pixels, the right one {} red (want > 100 each; green {green:?}, \
         red {red:?}, left and right)",
        green.0,
        red.1
    );
    assert!(
        green.1 < green.0 / 10 && red.0 < red.1 / 10,
        "each batch's material shows on the other's side: green {green:?}, red {red:?} (left, right)"
    );
    let top = count_pixels(&frame, 0..HEIGHT as usize / 5, |p| is_green(p) || is_red(p));
    assert_eq!(top, 0, "a copy of the mesh is drawn at the entity's transform");
    // Where the device gives bindless materials, the two share a bind group
    // at different slots: the colors above prove each draw found its own.
    let render_world = h.app.sub_app(bevy::render::RenderApp).world();
    let instances = render_world.resource::<bevy::pbr::RenderMaterialInstances>();
    let prepared = render_world
        .resource::<bevy::render::erased_render_asset::ErasedRenderAssets<bevy::pbr::PreparedMaterial>>();
    let binding = |e: Entity| {
        let id = instances.instances[&bevy::render::sync_world::MainEntity::from(e)].asset_id;
        let material = prepared.get(id).expect("prepared");
        (
            material.properties.bindless,
            material.binding.group.0,
            u32::from(material.binding.slot),
        )
    };
    let (left_binding, right_binding) = (binding(h.batch), binding(right));
    eprintln!("bindless, bind group, slot: left {left_binding:?}, right {right_binding:?}");
    if left_binding.0 {
        assert_ne!(left_binding, right_binding, "two bindless materials in one slot");
    }
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 16: an `ExtendedMaterial<StandardMaterial, _>` shades the
/// instances: the standard part's base color (yellow), the instance color
/// (white) and the extension's tint (cyan) make green.
#[test]
fn an_extended_standard_material_shades_the_instances() {
    type Extended = bevy::pbr::ExtendedMaterial<StandardMaterial, TintExtension>;
    let mut h = material_harness::<Extended>();
    record_render_errors(&mut h.app);
    let world = h.app.world_mut();
    let material = world.resource_mut::<Assets<Extended>>().add(Extended {
        base: StandardMaterial {
            base_color: Color::linear_rgb(1.0, 1.0, 0.05),
            unlit: true,
            ..default()
        },
        extension: TintExtension {
            tint: LinearRgba::rgb(0.05, 1.0, 1.0),
        },
    });
    let white: Vec<GpuCullInstance> = white_instances(world, h.batch);
    world.entity_mut(h.batch).insert(MeshMaterial3d(material));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(white);
    run_until_counts_match(&mut h, "extended material");
    let frame = frame_until(&mut h, |f| count_pixels(f, 0..HEIGHT as usize, is_green) > 200);
    let green = count_pixels(&frame, 0..HEIGHT as usize, is_green);
    assert!(
        green > 200,
        "only {green} pixels show the extended material's green"
    );
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// A batch with a blended material (drawn in Bevy's transparent phase)
/// draws no extra copy of the mesh at the entity's transform; Bevy queues
/// that copy in the same sorted phase.
#[test]
fn a_blended_material_draws_the_batch_and_no_extra_copy() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::linear_rgba(0.05, 1.0, 0.05, 0.9),
            alpha_mode: AlphaMode::Blend,
            unlit: true,
            ..default()
        });
    let white: Vec<GpuCullInstance> = under_the_sky(white_instances(world, h.batch));
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(material), transform_in_the_sky()));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(white);
    run_until_counts_match(&mut h, "blended material");
    let frame = frame_until(&mut h, |f| count_pixels(f, 0..HEIGHT as usize, is_green) > 200);
    let green = count_pixels(&frame, 0..HEIGHT as usize, is_green);
    assert!(green > 200, "only {green} pixels show the instances");
    // A few more frames: a copy would be queued once its pipeline compiled.
    for _ in 0..20 {
        h.app.update();
    }
    let frame = h.pixels.lock().unwrap().clone().expect("a frame was read back");
    let top = count_pixels(&frame, 0..HEIGHT as usize / 5, |p| p[1] > 60 && p[2] < 200);
    assert_eq!(top, 0, "a copy of the mesh is drawn at the entity's transform");
}

/// A flat 2x2 texture of one RGBA value, in linear space (normal maps are
/// data, not colors).
fn flat_texture(world: &mut World, rgba: [u8; 4], srgb: bool) -> Handle<Image> {
    world.resource_mut::<Assets<Image>>().add(Image::new_fill(
        bevy::render::render_resource::Extent3d {
            width: 2,
            height: 2,
            depth_or_array_layers: 1,
        },
        bevy::render::render_resource::TextureDimension::D2,
        &rgba,
        if srgb {
            TextureFormat::Rgba8UnormSrgb
        } else {
            TextureFormat::Rgba8Unorm
        },
        bevy::asset::RenderAssetUsages::RENDER_WORLD,
    ))
}

/// The mean red of the instances once drawn with `normal_map` on a mesh with
/// tangents.
fn red_with_normal_map(normal: [u8; 4]) -> f64 {
    instance_red(&frame_with_material(|world| StandardMaterial {
        normal_map_texture: Some(flat_texture(world, normal, false)),
        ..default()
    }))
}

/// The frame read back once the instances are drawn with the material
/// `make` gives (on an ico sphere with UVs and tangents).
fn frame_with_material(make: impl FnOnce(&mut World) -> StandardMaterial) -> Vec<u8> {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let mesh = Sphere::new(0.5)
        .mesh()
        .ico(1)
        .unwrap()
        .with_generated_tangents()
        .expect("an ico sphere has what tangents need");
    let mesh = world.resource_mut::<Assets<Mesh>>().add(mesh);
    let material = make(world);
    let material = world.resource_mut::<Assets<StandardMaterial>>().add(material);
    world
        .entity_mut(h.batch)
        .insert((Mesh3d(mesh), MeshMaterial3d(material)));
    run_until_counts_match(&mut h, "textured material");
    let start = std::time::Instant::now();
    while h.app.world().resource::<GpuCullStats>().drawn_frames < 3 && start.elapsed() < SETTLE {
        h.app.update();
    }
    for _ in 0..5 {
        h.app.update();
    }
    h.pixels.lock().unwrap().clone().expect("a frame was read back")
}

/// Issue 16: the material's metallic-roughness, emissive and occlusion
/// textures shade the instances as Bevy's would: each, black against white,
/// changes how red the instances are.
#[test]
fn metallic_roughness_emissive_and_occlusion_textures_shade_the_instances() {
    const WHITE: [u8; 4] = [255; 4];
    const BLACK: [u8; 4] = [0, 0, 0, 255];
    // Emissive red on a black material, scaled by the texture: black turns
    // the glow off, and the instances are no longer red. (Bright, not
    // blinding: tonemapped, a glow far past white turns white.)
    let emissive = |rgba| {
        instance_pixels(&frame_with_material(move |world| StandardMaterial {
            base_color: Color::BLACK,
            emissive: LinearRgba::rgb(4.0, 0.0, 0.0),
            emissive_texture: Some(flat_texture(world, rgba, true)),
            ..default()
        }))
        .count()
    };
    let (glowing, dark) = (emissive(WHITE), emissive(BLACK));
    eprintln!("emissive texture: {glowing} red pixels white, {dark} black");
    assert!(
        glowing > 50 && dark < glowing / 4,
        "the emissive texture changes nothing: {glowing} / {dark} red pixels"
    );
    // A metallic material whose texture's blue channel makes it metal
    // (white) or not (black), and its green channel rough or smooth.
    let metal = |rgba| {
        frame_with_material(move |world| StandardMaterial {
            metallic: 1.0,
            perceptual_roughness: 1.0,
            metallic_roughness_texture: Some(flat_texture(world, rgba, false)),
            ..default()
        })
    };
    let changed = changed_pixels(&metal(WHITE), &metal([0, 20, 0, 255]));
    eprintln!("metallic-roughness texture: {changed} pixels change");
    assert!(
        changed > 200,
        "the metallic-roughness texture changes {changed} pixels"
    );
    // Occlusion darkens the ambient light only.
    let occluded = |rgba| {
        frame_with_material(move |world| StandardMaterial {
            occlusion_texture: Some(flat_texture(world, rgba, false)),
            ..default()
        })
    };
    let changed = changed_pixels(&occluded(WHITE), &occluded(BLACK));
    eprintln!("occlusion texture: {changed} pixels change");
    assert!(changed > 200, "the occlusion texture changes {changed} pixels");
}

/// Issue 16: the material's normal map perturbs the instances' lighting: a
/// map tilting every normal sideways lights them differently from a flat one.
#[test]
fn a_normal_map_changes_the_instances_lighting() {
    let flat = red_with_normal_map([128, 128, 255, 255]);
    let tilted = red_with_normal_map([255, 128, 30, 255]);
    eprintln!("normal map: red {flat:.1} flat, {tilted:.1} tilted");
    assert!(
        (flat - tilted).abs() > flat * 0.1,
        "the normal map changes nothing: red {flat:.1} flat, {tilted:.1} tilted"
    );
}

/// A custom draw shader fetching instances through the plugin's shader
/// library and coloring them from their user data.
const USER_COLOR_SHADER: &str = r#"
#import bevy_pbr::view_transformations::position_world_to_clip
#import bevy_gpu_cull::instance::{
    fetch_instance, instance_to_world, drawn_by_other_winding, skipped_position,
}

struct Vertex {
    @builtin(instance_index) instance_index: u32,
    @location(0) position: vec3<f32>,
}

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) @interpolate(flat) user: vec4<u32>,
}

@vertex
fn vertex(v: Vertex) -> VertexOutput {
    let instance = fetch_instance(v.instance_index);
    var out: VertexOutput;
    // Mirror images are drawn by the batch's other draw (see above).
    if drawn_by_other_winding(instance) {
        out.clip_position = skipped_position();
        return out;
    }
    out.clip_position = position_world_to_clip(instance_to_world(instance, v.position));
    out.user = instance.user;
    return out;
}

@fragment
fn fragment(in: VertexOutput) -> @location(0) vec4<f32> {
    return vec4<f32>(vec3<f32>(in.user.xyz) / 255.0, 1.0);
}
"#;

#[test]
fn custom_draw_shader_reads_user_data() {
    let mut h = harness_with(
        None,
        &[looking_down_grid()],
        CameraSetup::CustomShader(USER_COLOR_SHADER),
    );
    for instance in h
        .app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .instances_mut()
    {
        instance.user = [0, 255, 0, 7];
    }
    run_until_counts_match(&mut h, "custom shader");
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let is_user_green = |p: &[u8]| p[0] < 5 && p[1] > 250 && p[2] < 5;
    let green = render_until_pixels(&mut h, 0..w, is_user_green, w * hgt / 10);
    assert!(
        green > w * hgt / 10,
        "only {green} pixels show the user-data color"
    );
}

/// White instances are drawn without their color passed on to the
/// material (it would change nothing and costs an interpolated value per
/// vertex); an edit that colors some of them re-specializes the draw, and
/// their color shows.
#[test]
fn instances_recolored_from_white_show_their_color() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            unlit: true,
            ..default()
        });
    let white = white_instances(world, h.batch);
    world.entity_mut(h.batch).insert(MeshMaterial3d(material));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(white);
    run_until_counts_match(&mut h, "white instances");
    let bright = |p: &[u8]| p[0] > 150 && p[1] > 150 && p[2] > 150;
    let frame = frame_until(&mut h, |f| count_pixels(f, 0..HEIGHT as usize, bright) > 200);
    let (white_pixels, red_pixels) = (
        count_pixels(&frame, 0..HEIGHT as usize, bright),
        count_pixels(&frame, 0..HEIGHT as usize, is_red),
    );
    assert!(
        white_pixels > 200 && red_pixels == 0,
        "white instances: {white_pixels} white pixels, {red_pixels} red"
    );
    // Half the list edited red (a range, not a new list).
    let mut batch = h.app.world_mut().get_mut::<GpuCullInstances>(h.batch).unwrap();
    let half = batch.len() / 2;
    for instance in batch.edit(0..half) {
        *instance = instance.with_color(LinearRgba::RED);
    }
    let frame = frame_until(&mut h, |f| count_pixels(f, 0..HEIGHT as usize, is_red) > 100);
    let red_pixels = count_pixels(&frame, 0..HEIGHT as usize, is_red);
    assert!(red_pixels > 100, "only {red_pixels} red pixels after the edit");
}
