//! The shared harness: a grid of spheres under cameras that render to
//! images, the CPU reference counts, and the helpers that run frames until
//! counts or pixels settle and read frames back.

use crate::common::{PipelinesIdle, watch_pipelines};
use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::image::Image;
use bevy::prelude::*;
use bevy::render::gpu_readback::{Readback, ReadbackComplete};
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy::window::ExitCondition;
use bevy_gpu_cull::prelude::*;

use std::sync::{Arc, Mutex};

pub(crate) const WIDTH: u32 = 96;
pub(crate) const HEIGHT: u32 = 64;
const BACKGROUND: Color = Color::srgb(0.0, 0.0, 1.0);

/// An app with one batch (the grid) and its cameras, and the first
/// camera's frames as they are read back.
pub(crate) struct Harness {
    pub(crate) app: App,
    pub(crate) batch: Entity,
    pub(crate) cameras: Vec<Entity>,
    pub(crate) pixels: Arc<Mutex<Option<Vec<u8>>>>,
}

/// `CameraSetup::Jittered`'s offset, in pixels along x: Bevy's jitter moves
/// the drawn image the other way along x (the wall's right edge runs along
/// y), so the depth the pyramid holds shows the wall this far right of the
/// projection the late phase tests with. Far more than TAA's half a pixel:
/// with the late phase's rectangles not widened by it, the instances in a
/// band this wide beside the wall's edge would be taken for hidden and lost.
const JITTER_PIXELS: f32 = -8.0;

/// How the cameras render.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum CameraSetup {
    /// LDR, no MSAA: the cheapest on lavapipe.
    Plain,
    /// An HDR camera (tonemapped into the LDR target) with 4x MSAA.
    HdrMsaa4,
    /// Plain, without pipelined rendering, so the test can reach the render world.
    PlainSynchronous,
    /// Plain, with this WGSL as the plugin's draw shader.
    CustomShader(&'static str),
    /// Plain, its projection jittered as temporal anti-aliasing jitters it,
    /// by more than TAA's half a pixel so that a rectangle not widened by
    /// the offset would lose instances at the wall's edge (a fixed offset:
    /// no TAA pass blends frames).
    Jittered,
}

/// A grid of spheres in the XZ plane, and cameras looking at parts of it.
pub(crate) fn harness(variant: Option<GpuCullScanVariant>, camera_transforms: &[Transform]) -> Harness {
    harness_with(variant, camera_transforms, CameraSetup::Plain)
}

pub(crate) fn harness_with(
    variant: Option<GpuCullScanVariant>,
    camera_transforms: &[Transform],
    setup: CameraSetup,
) -> Harness {
    harness_with_plugins(variant, camera_transforms, setup, |_| {})
}

/// The harness, with `add` adding the test's own plugins (a material's)
/// before the app is finished.
pub(crate) fn harness_with_plugins(
    variant: Option<GpuCullScanVariant>,
    camera_transforms: &[Transform],
    setup: CameraSetup,
    add: impl FnOnce(&mut App),
) -> Harness {
    let mut app = App::new();
    let mut plugins = DefaultPlugins
        .set(WindowPlugin {
            primary_window: None,
            exit_condition: ExitCondition::DontExit,
            ..default()
        })
        .disable::<bevy::log::LogPlugin>()
        .disable::<bevy::winit::WinitPlugin>();
    if setup == CameraSetup::PlainSynchronous {
        plugins = plugins.disable::<bevy::render::pipelined_rendering::PipelinedRenderingPlugin>();
    }
    app.add_plugins((plugins, ScheduleRunnerPlugin::run_loop(std::time::Duration::ZERO)));
    let idle = PipelinesIdle::default();
    app.insert_resource(idle.clone());
    if let Some(render_app) = app.get_sub_app_mut(bevy::render::RenderApp) {
        render_app.insert_resource(idle).add_systems(
            bevy::render::Render,
            watch_pipelines.in_set(bevy::render::RenderSystems::Cleanup),
        );
    }
    let draw_shader = match setup {
        CameraSetup::CustomShader(source) => bevy::shader::ShaderRef::Handle(
            app.world_mut()
                .resource_mut::<Assets<bevy::shader::Shader>>()
                .add(bevy::shader::Shader::from_wgsl(source, "test_custom_draw.wgsl")),
        ),
        _ => bevy::shader::ShaderRef::Default,
    };
    app.add_plugins(GpuCullPlugin {
        settings: GpuCullSettings {
            variant,
            format: GpuCullInstanceFormat::PosQuat,
            ..default()
        },
        draw_shader,
    });
    add(&mut app);
    let world = app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.5).mesh().ico(1).unwrap());
    let instances: Vec<GpuCullInstance> = (0..40 * 40)
        .map(|i| {
            let position = Vec3::new((i % 40) as f32 * 2.0 - 40.0, 0.0, (i / 40) as f32 * -2.0);
            GpuCullInstance::new(position, LinearRgba::rgb(1.0, 0.2, 0.1))
        })
        .collect();
    let batch = world.spawn((Mesh3d(mesh), GpuCullInstances::new(instances))).id();
    world.spawn((
        DirectionalLight::default(),
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut cameras = Vec::new();
    for (i, transform) in camera_transforms.iter().enumerate() {
        let (camera, handle) = spawn_image_camera(
            world,
            (WIDTH, HEIGHT),
            i as isize,
            ClearColorConfig::Custom(BACKGROUND),
            *transform,
        );
        match setup {
            CameraSetup::Plain | CameraSetup::PlainSynchronous | CameraSetup::CustomShader(_) => {
                world.entity_mut(camera).insert(Msaa::Off)
            }
            CameraSetup::HdrMsaa4 => world
                .entity_mut(camera)
                .insert((Msaa::Sample4, bevy::camera::Hdr)),
            CameraSetup::Jittered => world.entity_mut(camera).insert((
                Msaa::Off,
                bevy::render::camera::TemporalJitter {
                    offset: Vec2::new(JITTER_PIXELS, 0.0),
                },
            )),
        };
        cameras.push(camera);
        if i == 0 {
            world.spawn(Readback::texture(handle));
        }
    }
    let pixels = Arc::new(Mutex::new(None));
    let sink = pixels.clone();
    app.add_observer(move |event: On<ReadbackComplete>| {
        *sink.lock().unwrap() = Some(event.data.clone());
    });
    app.finish();
    app.cleanup();
    Harness {
        app,
        batch,
        cameras,
        pixels,
    }
}

/// A 3D camera at `transform` rendering, `order`th, into a new image of
/// `size` that can be read back, cleared to `clear`: its entity and image.
pub(crate) fn spawn_image_camera(
    world: &mut World,
    (width, height): (u32, u32),
    order: isize,
    clear: ClearColorConfig,
    transform: Transform,
) -> (Entity, Handle<Image>) {
    let mut image = Image::new_target_texture(width, height, TextureFormat::Rgba8UnormSrgb, None);
    image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
    let handle = world.resource_mut::<Assets<Image>>().add(image);
    let camera = Camera {
        order,
        clear_color: clear,
        ..default()
    };
    let target = RenderTarget::Image(ImageRenderTarget {
        handle: handle.clone(),
        scale_factor: 1.0,
    });
    let entity = world.spawn((Camera3d::default(), camera, target, transform)).id();
    (entity, handle)
}

/// A camera's frustum as the plugin builds it (from its projection and
/// transform).
pub(crate) fn camera_frustum(world: &mut World, camera: Entity) -> cull_core::Frustum {
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    cull_core::Frustum::from_view(cam.clip_from_view(), transform.to_matrix(), None).unwrap()
}

/// The CPU reference for a camera: instances whose bounding sphere touches
/// its frustum, taken into the batch's space as the plugin takes it.
pub(crate) fn expected_visible(app: &mut App, camera: Entity, batch: Entity) -> u32 {
    let world = app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let (clip_from_view, world_from_view) = (cam.clip_from_view(), transform.to_matrix());
    let batch_transform = world.get::<GlobalTransform>(batch).unwrap().to_matrix();
    let frustum = cull_core::LocalFrame::new(batch_transform)
        .unwrap()
        .frustum_from_view(clip_from_view, world_from_view, None)
        .unwrap();
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world
        .get::<GpuCullBounds>(batch)
        .expect("the plugin computed the batch's bounds");
    let batch = world.get::<GpuCullInstances>(batch).unwrap();
    batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32
}

/// The CPU reference count for each camera.
pub(crate) fn expected_counts(h: &mut Harness) -> Vec<u32> {
    let cameras = h.cameras.clone();
    cameras
        .iter()
        .map(|&c| expected_visible(&mut h.app, c, h.batch))
        .collect()
}

/// How long a test waits for the plugin to settle: the cull kernels and the
/// draw's pipeline compile in the background (on llvmpipe's GL, for
/// seconds), and frames without them are cheap, so a frame count is no bound.
pub(crate) const SETTLE: std::time::Duration = std::time::Duration::from_secs(120);

/// The main-world batches of the plugin's opaque draws last frame: those
/// drawn first in a pass of their own (`GpuCullOpaqueBatches`), and those
/// in Bevy's `Opaque3d` phase (its non-mesh items, every view's).
pub(crate) fn opaque_batch_draws(h: &Harness) -> (Vec<Entity>, Vec<Entity>) {
    use bevy::render::render_phase::{PhaseItem, ViewBinnedRenderPhases};
    let render_world = h.app.sub_app(bevy::render::RenderApp).world();
    let first = render_world.resource::<bevy_gpu_cull::GpuCullOpaqueBatches>();
    let first = first
        .iter()
        .flat_map(|(_, items)| items.iter().map(|item| item.main_entity().id()))
        .collect();
    let phases = render_world.resource::<ViewBinnedRenderPhases<bevy::core_pipeline::core_3d::Opaque3d>>();
    let in_phase = phases
        .values()
        .flat_map(|phase| phase.non_mesh_items.values())
        .flat_map(|items| items.entities.keys().map(|main| main.id()))
        .collect();
    (first, in_phase)
}

/// Runs frames until every camera reports a count for the batch that equals
/// the reference (counts arrive a frame or two late), or fails.
pub(crate) fn run_until_counts_match(h: &mut Harness, what: &str) -> Vec<u32> {
    let mut last = Vec::new();
    let start = std::time::Instant::now();
    while start.elapsed() < SETTLE {
        h.app.update();
        let expected = expected_counts(h);
        let stats = h.app.world().resource::<GpuCullStats>();
        last = h
            .cameras
            .iter()
            .map(|&c| stats.visible.get(&(c, h.batch)).copied().unwrap_or(u32::MAX))
            .collect();
        if last == expected && stats.culled_frames > 3 {
            return expected;
        }
    }
    let expected = expected_counts(h);
    panic!("{what}: GPU counts {last:?}, CPU reference {expected:?}");
}

pub(crate) fn looking_down_grid() -> Transform {
    Transform::from_xyz(0.0, 6.0, 8.0).looking_at(Vec3::new(0.0, 0.0, -10.0), Vec3::Y)
}

/// Renders until the frame shows the clear color (pipelines compile
/// asynchronously), then checks the instances cover the lower part of the
/// view and the sky stays background. Saves the frame to the temp folder.
pub(crate) fn assert_renders(h: &mut Harness, what: &str) -> Vec<u8> {
    assert_renders_when(h, what, |_| true)
}

/// [`assert_renders`], also waiting until `ready` holds for the frame (for
/// other meshes whose pipelines compile later); returns the frame.
pub(crate) fn assert_renders_when(h: &mut Harness, what: &str, ready: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    // Pipelines compile asynchronously: render until the frame shows the
    // clear color, then judge it.
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    // Blue, also after an HDR camera's tonemapping.
    let is_background = |p: &[u8]| p[0] < 60 && p[1] < 100 && p[2] > 150;
    // The instances are red-orange, lit: red clearly above blue.
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let mut last = None;
    for _ in 0..300 {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        // Rows of a texture readback are padded to 256 bytes.
        let stride = padded.len() / hgt;
        let pixels: Vec<u8> = padded
            .chunks(stride)
            .flat_map(|row| row[..w * 4].to_vec())
            .collect();
        let pixel = |x: usize, y: usize| pixels[(y * w + x) * 4..(y * w + x) * 4 + 4].to_vec();
        let covered = (0..hgt)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| is_instance(&pixel(x, y)))
            .count();
        let sky = pixel(w / 2, 1);
        last = Some((covered, sky.clone(), pixels.clone()));
        if is_background(&sky) && covered > w * hgt / 10 && ready(&pixels) {
            break;
        }
    }
    let (covered, sky, pixels) = last.expect("the render target was read back");
    let png = debug_image(what);
    let _ = image::save_buffer(&png, &pixels, WIDTH, HEIGHT, image::ColorType::Rgba8);
    assert!(
        is_background(&sky),
        "{what}: the sky is not background: {sky:?} (see {})",
        png.display()
    );
    assert!(
        covered > w * hgt / 10,
        "{what}: only {covered} pixels show instances (see {})",
        png.display()
    );
    pixels
}

/// The pixels (RGBA) of rows `rows` of a padded readback (rows of a texture
/// readback are padded to 256 bytes).
pub(crate) fn frame_rows(padded: &[u8], rows: std::ops::Range<usize>) -> impl Iterator<Item = &[u8]> {
    let stride = padded.len() / HEIGHT as usize;
    rows.flat_map(move |y| padded[y * stride..y * stride + WIDTH as usize * 4].chunks(4))
}

/// How many pixels of rows `rows` match.
pub(crate) fn count_pixels(
    padded: &[u8],
    rows: std::ops::Range<usize>,
    matches: impl Fn(&[u8]) -> bool,
) -> usize {
    frame_rows(padded, rows).filter(|p| matches(p)).count()
}

/// A lit ground under a raised batch, a light with shadows; `casts` false
/// marks the batch `NotShadowCaster`. Returns the harness once the counts
/// match and the frame has settled.
pub(crate) fn shadow_scene(light: &str, casts: bool) -> Harness {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    // Raised spheres, sparse enough that the ground shows between them.
    let instances: Vec<GpuCullInstance> = (0..12 * 12)
        .map(|i| {
            let p = Vec3::new((i % 12) as f32 * 3.0 - 18.0, 2.0, (i / 12) as f32 * -3.0);
            GpuCullInstance::new(p, Srgba::rgb(1.0, 0.2, 0.1)).with_scale(1.5)
        })
        .collect();
    world
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .replace(instances);
    if !casts {
        world.entity_mut(h.batch).insert(bevy::light::NotShadowCaster);
    }
    let ground_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Plane3d::default().mesh().size(200.0, 200.0));
    let ground_material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::WHITE));
    world.spawn((
        Mesh3d(ground_mesh),
        MeshMaterial3d(ground_material),
        Transform::from_xyz(0.0, 0.0, -20.0),
    ));
    // Replace the harness's light by one that casts shadows.
    let lights: Vec<Entity> = world
        .query_filtered::<Entity, With<DirectionalLight>>()
        .iter(world)
        .collect();
    for light in lights {
        world.despawn(light);
    }
    match light {
        "directional" => world.spawn((
            DirectionalLight {
                shadow_maps_enabled: true,
                illuminance: 20_000.0,
                ..default()
            },
            Transform::from_xyz(2.0, 10.0, 1.0).looking_at(Vec3::ZERO, Vec3::Y),
        )),
        "spot" => world.spawn((
            SpotLight {
                shadow_maps_enabled: true,
                intensity: 4.0e8,
                range: 200.0,
                outer_angle: 1.2,
                inner_angle: 1.0,
                ..default()
            },
            Transform::from_xyz(0.0, 14.0, -14.0).looking_at(Vec3::new(0.0, 0.0, -16.0), Vec3::Y),
        )),
        _ => world.spawn((
            PointLight {
                shadow_maps_enabled: true,
                intensity: 4.0e8,
                // Short of the batch's far corners: the faces cull by range too.
                range: 18.0,
                ..default()
            },
            Transform::from_xyz(0.0, 12.0, -10.0),
        )),
    };
    run_until_counts_match(&mut h, &format!("{light} shadows"));
    h
}

/// The mean red of the pixels that show instances (red well above blue).
pub(crate) fn instance_red(padded: &[u8]) -> f64 {
    let reds: Vec<u64> = instance_pixels(padded).map(|p| p[0] as u64).collect();
    assert!(reds.len() > 50, "only {} instance pixels", reds.len());
    reds.iter().sum::<u64>() as f64 / reds.len() as f64
}

/// The RGBA pixels of a frame read back with padded rows.
pub(crate) fn frame_pixels(padded: &[u8]) -> impl Iterator<Item = &[u8]> {
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let stride = padded.len() / hgt;
    (0..hgt).flat_map(move |y| padded[y * stride..y * stride + w * 4].chunks(4))
}

/// The pixels that are clearly red: the instances' color.
pub(crate) fn instance_pixels(padded: &[u8]) -> impl Iterator<Item = &[u8]> {
    frame_pixels(padded).filter(|p| p[0] as u32 > p[2] as u32 + 30)
}

/// The camera's prepass depth, copied after the prepass (test only).
#[derive(Resource, Clone, Default)]
pub(crate) struct DepthProbe(Arc<Mutex<Option<wgpu::Buffer>>>);

/// Bytes per row of the probe's copy: rows of a texture copy are padded to 256.
const DEPTH_ROW: u32 = (WIDTH * 4).div_ceil(256) * 256;

fn copy_prepass_depth(
    view: bevy::render::renderer::ViewQuery<&bevy::render::view::ViewDepthTexture>,
    device: Res<bevy::render::renderer::RenderDevice>,
    probe: Res<DepthProbe>,
    mut ctx: bevy::render::renderer::RenderContext,
) {
    // Between the prepass and the main pass the view's depth buffer holds
    // what the prepass wrote (a DepthPrepass gives it COPY_SRC).
    let depth = view.into_inner();
    let buffer = device.wgpu_device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("test_prepass_depth"),
        size: (DEPTH_ROW * HEIGHT) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    ctx.command_encoder().copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture: &depth.texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::DepthOnly,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &buffer,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(DEPTH_ROW),
                rows_per_image: None,
            },
        },
        wgpu::Extent3d {
            width: WIDTH,
            height: HEIGHT,
            depth_or_array_layers: 1,
        },
    );
    *probe.0.lock().unwrap() = Some(buffer);
}

/// Copies the camera's prepass depth every frame (`copy_prepass_depth`).
pub(crate) fn install_depth_probe(h: &mut Harness) -> DepthProbe {
    use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
    let probe = DepthProbe::default();
    h.app
        .sub_app_mut(bevy::render::RenderApp)
        .insert_resource(probe.clone())
        .add_systems(
            Core3d,
            copy_prepass_depth
                .after(Core3dSystems::Prepass)
                .before(Core3dSystems::MainPass),
        );
    probe
}

/// The depth `probe` copied last (`copy_prepass_depth`), one value per
/// pixel, row by row.
pub(crate) fn prepass_depth(h: &Harness, probe: &DepthProbe) -> Vec<f32> {
    let render_world = h.app.sub_app(bevy::render::RenderApp).world();
    let device = render_world.resource::<bevy::render::renderer::RenderDevice>();
    let queue = render_world.resource::<bevy::render::renderer::RenderQueue>();
    let buffer = probe
        .0
        .lock()
        .unwrap()
        .clone()
        .expect("the prepass depth was copied");
    let bytes = cull_core::read_back(device.wgpu_device(), queue, &buffer, 0, buffer.size()).unwrap();
    (0..(WIDTH * HEIGHT) as usize)
        .map(|i| {
            let (x, y) = (i % WIDTH as usize, i / WIDTH as usize);
            let at = y * DEPTH_ROW as usize + x * 4;
            f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
        })
        .collect()
}

pub(crate) fn is_red(p: &[u8]) -> bool {
    p[0] > 60 && p[0] as u32 > p[1] as u32 + 40 && p[0] as u32 > p[2] as u32 + 40
}

/// Pixels whose color differs by more than a few steps between two frames.
pub(crate) fn changed_pixels(a: &[u8], b: &[u8]) -> usize {
    frame_pixels(a)
        .zip(frame_pixels(b))
        .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 8))
        .count()
}

/// Renders (at most 300 frames) until more than `enough` pixels of the
/// first camera's frame, in columns `columns`, pass `matches`; returns how
/// many did in the last frame read back.
pub(crate) fn render_until_pixels(
    h: &mut Harness,
    columns: std::ops::Range<usize>,
    matches: impl Fn(&[u8]) -> bool,
    enough: usize,
) -> usize {
    let hgt = HEIGHT as usize;
    let mut found = 0;
    for _ in 0..300 {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        // Rows of a texture readback are padded to 256 bytes.
        let stride = padded.len() / hgt;
        found = (0..hgt)
            .flat_map(|y| columns.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| matches(&padded[y * stride + x * 4..y * stride + x * 4 + 4]))
            .count();
        if found > enough {
            break;
        }
    }
    found
}

/// wgpu errors Bevy caught in an app (see [`record_render_errors`]): a
/// resource of its own main world, since tests run apps side by side.
#[derive(Resource, Default)]
pub(crate) struct RecordedRenderErrors(Vec<String>);

/// Routes Bevy's render errors (wgpu validation, out of memory, device
/// loss) into the app's [`RecordedRenderErrors`] instead of quitting, so a
/// test can assert there were none ([`render_errors`]).
pub(crate) fn record_render_errors(app: &mut App) {
    use bevy::render::error_handler::{RenderErrorHandler, RenderErrorPolicy};
    app.init_resource::<RecordedRenderErrors>();
    app.insert_resource(RenderErrorHandler(|error, main_world, _| {
        main_world
            .resource_mut::<RecordedRenderErrors>()
            .0
            .push(format!("{:?}: {}", error.ty, error.description));
        RenderErrorPolicy::Ignore
    }));
}

/// The render errors `app` recorded so far.
pub(crate) fn render_errors(app: &App) -> Vec<String> {
    app.world().resource::<RecordedRenderErrors>().0.clone()
}

/// Where a test saves a frame for whoever reads its failure: named after
/// the test (libtest names each test's thread after it), since tests run
/// side by side, and after `what`.
pub(crate) fn debug_image(what: &str) -> std::path::PathBuf {
    let test = std::thread::current().name().unwrap_or("test").replace("::", "-");
    let what: String = what
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    std::env::temp_dir().join(format!("bevy-gpu-cull-{test}-{what}.png"))
}

/// The volume each cascade of `camera`'s directional light culls a batch
/// with, as the plugin builds it (`cascade_volume`): the camera's view
/// between the depths Bevy reads the cascade at (the first from the
/// camera's near plane, a later one from its overlap with the previous
/// one), swept toward the light, widened by eight texels and the normal
/// bias (Bevy's extracted one, times √2), the temporal filter's reach and a
/// negative depth bias; with each cascade's box. `None` until Bevy has
/// built the cascades.
pub fn cascade_volumes(world: &mut World, camera: Entity) -> Option<(Entity, Vec<CascadeVolume>)> {
    let (light, cascades, config, sun, sun_transform) = world
        .query::<(
            Entity,
            &bevy::light::Cascades,
            &bevy::light::CascadeShadowConfig,
            &DirectionalLight,
            &GlobalTransform,
        )>()
        .single(world)
        .ok()?;
    let cascades = cascades.cascades.get(&camera)?.clone();
    let (config, sun, light_direction) = (config.clone(), *sun, sun_transform.rotation() * Vec3::NEG_Z);
    let (view, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .ok()?;
    let (clip_from_view, world_from_view) = (view.clip_from_view(), transform.to_matrix());
    let normal_bias = sun.shadow_normal_bias * std::f32::consts::SQRT_2;
    let volumes = cascades
        .iter()
        .enumerate()
        .map(|(index, cascade)| {
            let near = match index {
                0 => f32::NEG_INFINITY,
                _ => config.bounds[index - 1] * (1.0 - config.overlap_proportion),
            };
            let receivers = cull_core::ShadowReceivers {
                clip_from_view,
                world_from_view,
                near,
                far: config.bounds[index],
                light_direction,
                margin: cascade.texel_size * (8.0 + normal_bias) + 0.015 + (-sun.shadow_depth_bias).max(0.0),
            };
            CascadeVolume {
                reach: cull_core::Frustum::from_shadow_receivers(&receivers).unwrap(),
                cascade_box: cull_core::Frustum::from_shadow_cascade(cascade.clip_from_world).unwrap(),
            }
        })
        .collect();
    Some((light, volumes))
}

/// A cascade's volume as the plugin culls with it, and its whole box.
pub struct CascadeVolume {
    pub reach: cull_core::Frustum,
    pub cascade_box: cull_core::Frustum,
}
