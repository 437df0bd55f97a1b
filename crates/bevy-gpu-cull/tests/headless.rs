//! The plugin in a headless app on the adapter Bevy finds (lavapipe on
//! machines without a GPU): visible counts equal the CPU reference per
//! camera, pixels are covered where instances are and background elsewhere,
//! counts follow edits, and empty batches draw nothing.

mod common;

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::image::Image;
use bevy::prelude::*;
use bevy::render::gpu_readback::{Readback, ReadbackComplete};
use bevy::render::render_resource::{AsBindGroup, TextureFormat, TextureUsages};
use bevy::window::ExitCondition;
use bevy_gpu_cull::MAX_LOD_LEVELS;
use bevy_gpu_cull::prelude::*;
use common::{PipelinesIdle, watch_pipelines};

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

const WIDTH: u32 = 96;
const HEIGHT: u32 = 64;
const BACKGROUND: Color = Color::srgb(0.0, 0.0, 1.0);
/// One app at a time: lavapipe has two cores to share.
static SERIAL: Mutex<()> = Mutex::new(());

struct Harness {
    app: App,
    batch: Entity,
    cameras: Vec<Entity>,
    pixels: Arc<Mutex<Option<Vec<u8>>>>,
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
enum CameraSetup {
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
fn harness(variant: Option<ScanVariant>, camera_transforms: &[Transform]) -> Harness {
    harness_with(variant, camera_transforms, CameraSetup::Plain)
}

fn harness_with(
    variant: Option<ScanVariant>,
    camera_transforms: &[Transform],
    setup: CameraSetup,
) -> Harness {
    harness_with_plugins(variant, camera_transforms, setup, |_| {})
}

/// The harness, with `add` adding the test's own plugins (a material's)
/// before the app is finished.
fn harness_with_plugins(
    variant: Option<ScanVariant>,
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
            format: InstanceFormat::PosQuat,
        },
        draw_shader,
    });
    add(&mut app);
    let world = app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.5).mesh().ico(1).unwrap());
    let instances: Vec<CulledInstance> = (0..40 * 40)
        .map(|i| {
            let position = Vec3::new((i % 40) as f32 * 2.0 - 40.0, 0.0, (i / 40) as f32 * -2.0);
            CulledInstance::new(position, LinearRgba::rgb(1.0, 0.2, 0.1))
        })
        .collect();
    let batch = world
        .spawn((Mesh3d(mesh), GpuCulledInstances::new(instances)))
        .id();
    world.spawn((
        DirectionalLight::default(),
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut cameras = Vec::new();
    for (i, transform) in camera_transforms.iter().enumerate() {
        let mut image = Image::new_target_texture(WIDTH, HEIGHT, TextureFormat::Rgba8UnormSrgb, None);
        image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
        let handle = world.resource_mut::<Assets<Image>>().add(image);
        let camera = world
            .spawn((
                Camera3d::default(),
                Camera {
                    order: i as isize,
                    clear_color: ClearColorConfig::Custom(BACKGROUND),
                    ..default()
                },
                RenderTarget::Image(ImageRenderTarget {
                    handle: handle.clone(),
                    scale_factor: 1.0,
                }),
                *transform,
            ))
            .id();
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

/// A camera's frustum as the plugin builds it (from its projection and
/// transform).
fn camera_frustum(world: &mut World, camera: Entity) -> cull_core::Frustum {
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    cull_core::Frustum::from_view(cam.clip_from_view(), transform.to_matrix(), None).unwrap()
}

/// The CPU reference for a camera: instances whose bounding sphere touches
/// its frustum, taken into the batch's space as the plugin takes it.
fn expected_visible(app: &mut App, camera: Entity, batch: Entity) -> u32 {
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
    let batch = world.get::<GpuCulledInstances>(batch).unwrap();
    batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32
}

/// The CPU reference count for each camera.
fn expected_counts(h: &mut Harness) -> Vec<u32> {
    let cameras = h.cameras.clone();
    cameras
        .iter()
        .map(|&c| expected_visible(&mut h.app, c, h.batch))
        .collect()
}

/// How long a test waits for the plugin to settle: the cull kernels and the
/// draw's pipeline compile in the background (on llvmpipe's GL, for
/// seconds), and frames without them are cheap, so a frame count is no bound.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs frames until every camera reports a count for the batch that equals
/// the reference (counts arrive a frame or two late), or fails.
fn run_until_counts_match(h: &mut Harness, what: &str) -> Vec<u32> {
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

/// An edit Bevy sees but the component's methods did not record (through
/// reflection, as an inspector or a scene makes one) uploads the whole
/// list: the counts follow it.
#[test]
fn an_edit_through_reflection_is_uploaded() {
    use bevy::reflect::GetPath;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let before = run_until_counts_match(&mut h, "before the edit");
    assert!(before.iter().all(|&c| c > 0), "{before:?}");
    let uploaded = h.app.world().resource::<GpuCullStats>().uploaded_instances;
    let mut batch = h.app.world_mut().get_mut::<GpuCulledInstances>(h.batch).unwrap();
    // Half the instances lifted far above the view.
    for i in (0..batch.len()).step_by(2) {
        let position = batch
            .path_mut::<Vec3>(format!("instances[{i}].position").as_str())
            .expect("a reflected instance position");
        position.y += 1000.0;
    }
    let after = run_until_counts_match(&mut h, "after an edit through reflection");
    assert_ne!(before, after, "the edit changed no count");
    let stats = h.app.world().resource::<GpuCullStats>();
    assert!(stats.uploaded_instances > uploaded, "nothing was uploaded");
}

fn looking_down_grid() -> Transform {
    Transform::from_xyz(0.0, 6.0, 8.0).looking_at(Vec3::new(0.0, 0.0, -10.0), Vec3::Y)
}

/// Renders until the frame shows the clear color (pipelines compile
/// asynchronously), then checks the instances cover the lower part of the
/// view and the sky stays background. Saves the frame to the temp folder.
fn assert_renders(h: &mut Harness, what: &str) -> Vec<u8> {
    assert_renders_when(h, what, |_| true)
}

/// [`assert_renders`], also waiting until `ready` holds for the frame (for
/// other meshes whose pipelines compile later); returns the frame.
fn assert_renders_when(h: &mut Harness, what: &str, ready: impl Fn(&[u8]) -> bool) -> Vec<u8> {
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
    let png = std::env::temp_dir().join(format!(
        "bevy-gpu-cull-{}.png",
        what.replace([' ', '(', ')', ':'], "")
    ));
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

#[test]
fn counts_match_reference_and_pixels_show_instances() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let variants: Vec<Option<ScanVariant>> = std::iter::once(None)
        .chain(ScanVariant::compiled().map(Some))
        .collect();
    for variant in variants {
        let mut h = harness(variant, &[looking_down_grid()]);
        let expected = run_until_counts_match(&mut h, &format!("{variant:?}"));
        assert!(
            expected[0] > 20 && expected[0] < 1600,
            "the camera sees part of the grid: {expected:?}"
        );
        assert_renders(&mut h, &format!("{variant:?}"));
        // The frames that showed instances were drawn by the plugin, which
        // reports it from the render world a frame or two later.
        let drawn = |h: &Harness| h.app.world().resource::<GpuCullStats>().drawn_frames;
        for _ in 0..5 {
            if drawn(&h) > 0 {
                break;
            }
            h.app.update();
        }
        assert!(
            drawn(&h) > 0,
            "{variant:?}: instances on screen, but drawn_frames = 0"
        );
        // The grid's mesh is a sphere centred on its origin and the default
        // format rotates centers, and Bevy's perspective camera has five
        // planes: the plugin compiles the kernels without the rotation and
        // for plain views after the general one, and the counts stay the
        // reference's once it culls with the form that has both.
        let centred = |h: &Harness| {
            let kernels = &h.app.world().resource::<GpuCullStats>().kernels;
            let has = |centred: bool, plain: bool| {
                kernels.iter().any(|(_, spec)| {
                    spec.centred == centred
                        && spec.plain_views == plain
                        && spec.views == 1
                        && spec.test == cull_core::VisibilityTest::Frustum
                })
            };
            has(true, false) && has(false, true) && has(true, true)
        };
        for _ in 0..300 {
            if centred(&h) {
                break;
            }
            h.app.update();
        }
        let kernels = h.app.world().resource::<GpuCullStats>().kernels.clone();
        assert!(
            centred(&h),
            "{variant:?}: not every form for a centred mesh and plain views: {kernels:?}"
        );
        let general = kernels
            .iter()
            .position(|(_, s)| !s.centred && !s.plain_views)
            .unwrap();
        let faster = kernels
            .iter()
            .position(|(_, s)| s.centred || s.plain_views)
            .unwrap();
        assert!(
            general < faster,
            "{variant:?}: a faster form came before the general kernel: {kernels:?}"
        );
        run_until_counts_match(&mut h, &format!("{variant:?}, centred kernel"));
    }
}

#[test]
fn several_cameras_edits_and_empty_batches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let near = looking_down_grid();
    let far_left = Transform::from_xyz(-30.0, 3.0, 5.0).looking_at(Vec3::new(-40.0, 0.0, -20.0), Vec3::Y);
    let mut h = harness(None, &[near, far_left]);
    let counts = run_until_counts_match(&mut h, "two cameras");
    assert_ne!(counts[0], counts[1], "different frusta see different instances");
    // Shrink the batch: counts follow.
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .truncate(700);
    let shrunk = run_until_counts_match(&mut h, "after shrinking");
    assert!(shrunk[0] <= counts[0]);
    // Grow it past its capacity: buffers are replaced.
    let more: Vec<CulledInstance> = (0..5000)
        .map(|i| {
            CulledInstance::new(
                Vec3::new((i % 50) as f32 - 25.0, 0.0, -((i / 50) as f32)),
                LinearRgba::WHITE,
            )
        })
        .collect();
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(more);
    run_until_counts_match(&mut h, "after growing");
    // Empty: nothing visible, no error.
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .clear();
    let empty = run_until_counts_match(&mut h, "empty batch");
    assert_eq!(empty, vec![0, 0]);
    // A batch culled (here: emptied) to nothing is drawn with zero
    // instances: such frames are not counted as drawn.
    for _ in 0..3 {
        h.app.update();
    }
    let drawn = h.app.world().resource::<GpuCullStats>().drawn_frames;
    for _ in 0..5 {
        h.app.update();
    }
    assert_eq!(
        h.app.world().resource::<GpuCullStats>().drawn_frames,
        drawn,
        "frames drawing an empty batch counted as drawn"
    );
    // Switching the variant at run time takes effect.
    let target = ScanVariant::compiled().last().unwrap();
    h.app.world_mut().resource_mut::<GpuCullSettings>().variant = Some(target);
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(
            (0..300)
                .map(|i| CulledInstance::new(Vec3::new(i as f32 * 0.3 - 45.0, 0.0, -5.0), LinearRgba::WHITE))
                .collect(),
        );
    // The previous culler keeps culling until the new kernels are compiled.
    let start = std::time::Instant::now();
    while h.app.world().resource::<GpuCullStats>().variant != Some(target) && start.elapsed() < SETTLE {
        h.app.update();
    }
    run_until_counts_match(&mut h, "after switching variant");
    for _ in 0..3 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.variant, Some(target));
    // Timestamps (lavapipe has them) arrive without blocking the frame.
    assert!(
        stats.gpu_time_ms.is_some_and(|ms| ms > 0.0),
        "no GPU time: {:?}",
        stats.gpu_time_ms
    );
    assert!(!stats.timings.is_empty());
}

/// Issue 15: switching the variant and format never stalls a frame. The
/// new kernels compile in Bevy's `PipelineCache` while the previous culler
/// keeps culling: frames after the switch are still culled by the old
/// variant, no render frame goes unculled, and the new one takes over.
#[test]
fn switching_settings_keeps_culling_while_kernels_compile() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    run_until_counts_match(&mut h, "before the switch");
    let stats = h.app.world().resource::<GpuCullStats>();
    let before = stats.variant.expect("culled");
    let (culled0, frame0) = (stats.culled_frames, stats.render_frame);
    let target = ScanVariant::compiled()
        .filter(|v| *v != before)
        .last()
        .expect("at least two variants are compiled in for this test");
    {
        let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
        settings.variant = Some(target);
        settings.format = InstanceFormat::Matrix;
    }
    let mut seen = Vec::new();
    let start = std::time::Instant::now();
    while start.elapsed() < SETTLE {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        seen.push((stats.render_frame, stats.variant));
        if stats.variant == Some(target) {
            break;
        }
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    eprintln!("switch from {before:?} (frame {frame0}) to {target:?}: {seen:?}");
    assert_eq!(
        stats.variant,
        Some(target),
        "the new culler never took over: {seen:?}"
    );
    // The switch is extracted two render frames after frame0 at the latest
    // (one still in flight when it was made); a frame culled by the old
    // variant after that shows the old culler kept culling.
    assert!(
        seen.iter()
            .any(|&(frame, variant)| frame >= frame0 + 2 && variant == Some(before)),
        "the old culler stopped at the switch: {seen:?}"
    );
    assert_eq!(
        stats.culled_frames - culled0,
        stats.render_frame - frame0,
        "a render frame went unculled during the switch: {seen:?}"
    );
    run_until_counts_match(&mut h, "after the switch");
}

/// The pixels (RGBA) of rows `rows` of a padded readback (rows of a texture
/// readback are padded to 256 bytes).
fn frame_rows(padded: &[u8], rows: std::ops::Range<usize>) -> impl Iterator<Item = &[u8]> {
    let stride = padded.len() / HEIGHT as usize;
    rows.flat_map(move |y| padded[y * stride..y * stride + WIDTH as usize * 4].chunks(4))
}

/// How many pixels of rows `rows` match.
fn count_pixels(padded: &[u8], rows: std::ops::Range<usize>, matches: impl Fn(&[u8]) -> bool) -> usize {
    frame_rows(padded, rows).filter(|p| matches(p)).count()
}

/// The mean of a frame's red, green and blue, from the padded readback.
fn frame_mean(padded: &[u8]) -> f64 {
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let stride = padded.len() / hgt;
    let mut sum = 0u64;
    for y in 0..hgt {
        for p in padded[y * stride..y * stride + w * 4].chunks(4) {
            sum += p[0] as u64 + p[1] as u64 + p[2] as u64;
        }
    }
    sum as f64 / (w * hgt * 3) as f64
}

/// A lit ground under a raised batch, a light with shadows; `casts` false
/// marks the batch `NotShadowCaster`. Returns the harness once the counts
/// match and the frame has settled.
fn shadow_scene(light: &str, casts: bool) -> Harness {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    // Raised spheres, sparse enough that the ground shows between them.
    let instances: Vec<CulledInstance> = (0..12 * 12)
        .map(|i| {
            let p = Vec3::new((i % 12) as f32 * 3.0 - 18.0, 2.0, (i / 12) as f32 * -3.0);
            CulledInstance::new(p, Srgba::rgb(1.0, 0.2, 0.1)).with_scale(1.5)
        })
        .collect();
    world
        .get_mut::<GpuCulledInstances>(h.batch)
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

/// Renders until the lit ground covers a third of the frame (its
/// material's pipeline compiles in the background) and the frame's mean
/// brightness has held still for 15 frames; returns that mean.
fn settle_stable(h: &mut Harness) -> f64 {
    let is_ground =
        |p: &[u8]| p[0] > 100 && p[1] > 100 && p[2] > 100 && (p[0] as i32 - p[2] as i32).abs() < 40;
    let start = std::time::Instant::now();
    let mut means: Vec<f64> = Vec::new();
    while start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        let ground = count_pixels(&padded, 0..HEIGHT as usize, is_ground);
        if ground * 3 < (WIDTH * HEIGHT) as usize {
            means.clear();
            continue;
        }
        means.push(frame_mean(&padded));
        let last = &means[means.len().saturating_sub(15)..];
        if last.len() == 15
            && last.iter().cloned().fold(f64::MIN, f64::max) - last.iter().cloned().fold(f64::MAX, f64::min)
                < 0.3
        {
            return *last.last().unwrap();
        }
    }
    panic!("the lit ground never settled: {means:?}");
}

/// The frame's mean with the batch not casting (it starts with
/// `NotShadowCaster`), then with it casting: the same app, the same ground.
fn shadow_contrast(light: &str) -> (Harness, f64, f64) {
    let mut h = shadow_scene(light, false);
    let unshadowed = settle_stable(&mut h);
    h.app
        .world_mut()
        .entity_mut(h.batch)
        .remove::<bevy::light::NotShadowCaster>();
    let shadowed = settle_mean(&mut h, |mean| mean < unshadowed * 0.97);
    eprintln!("{light}: mean {shadowed:.2} casting, {unshadowed:.2} not casting");
    assert!(
        shadowed < unshadowed * 0.97,
        "{light}: the batch's shadows do not darken the ground: {shadowed:.2} with, {unshadowed:.2} without"
    );
    (h, unshadowed, shadowed)
}

/// Renders until `done` holds for the frame's mean brightness (shadow
/// pipelines compile in the background), or returns the last mean.
fn settle_mean(h: &mut Harness, done: impl Fn(f64) -> bool) -> f64 {
    let start = std::time::Instant::now();
    let mut mean = f64::NAN;
    let mut frames = 0;
    while start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        mean = frame_mean(&padded);
        frames += 1;
        if frames > 20 && done(mean) {
            break;
        }
    }
    mean
}

/// Issue 16: the batch casts shadows from a directional light (every
/// cascade culled on the GPU against its own frustum, opened toward the
/// light): the frame is darker than with the batch marked NotShadowCaster,
/// and each cascade's count equals the CPU reference for its frustum.
#[test]
fn directional_light_shadows_are_cast_and_culled_per_cascade() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut h, _, _) = shadow_contrast("directional");
    // Each cascade of the camera: the GPU's count equals the CPU reference.
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    let (light, cascades) = world
        .query::<(Entity, &bevy::light::Cascades)>()
        .single(world)
        .unwrap();
    let cascades = cascades.cascades[&camera].clone();
    assert!(!cascades.is_empty());
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCulledInstances>(h.batch).unwrap().clone();
    let stats = world.resource::<GpuCullStats>().clone();
    for (index, cascade) in cascades.iter().enumerate() {
        let frustum = cull_core::Frustum::from_shadow_cascade(cascade.clip_from_world).unwrap();
        let expected = batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
        eprintln!(
            "cascade {index}: {expected} of {} instances cast into it",
            batch.instances().len()
        );
        let id = ShadowViewId {
            light,
            camera: Some(camera),
            index: index as u32,
        };
        assert_eq!(
            stats.shadow_visible.get(&(id, h.batch)),
            Some(&expected),
            "cascade {index}: {:?}",
            stats.shadow_visible
        );
    }
}

/// Issue 16: the batch casts shadows from a point light: each cube face is
/// culled on the GPU (its count equal to the CPU reference for that face)
/// and drawn into the light's shadow map.
#[test]
fn point_light_shadows_are_cast() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut h, _, _) = shadow_contrast("point");
    // Each cube face as Bevy builds it (prepare_lights: the light's
    // translation, the face's rotation, a 90° infinite reverse-Z projection):
    // the GPU's count equals the CPU reference for that face's frustum.
    let world = h.app.world_mut();
    let (light, light_transform, point) = world
        .query::<(Entity, &GlobalTransform, &PointLight)>()
        .single(world)
        .unwrap();
    let (position, near, range) = (
        light_transform.translation(),
        point.shadow_map_near_z,
        point.range,
    );
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCulledInstances>(h.batch).unwrap().clone();
    let stats = world.resource::<GpuCullStats>().clone();
    let projection = Mat4::perspective_infinite_reverse_rh(std::f32::consts::FRAC_PI_2, 1.0, near);
    let mut faces = Vec::new();
    for (index, face) in bevy::camera::primitives::CUBE_MAP_FACES.iter().enumerate() {
        let world_from_view = GlobalTransform::from_translation(position)
            * Transform::IDENTITY.looking_at(face.target, face.up);
        let frustum =
            cull_core::Frustum::from_view(projection, world_from_view.to_matrix(), Some(range)).unwrap();
        let expected = batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
        let id = ShadowViewId {
            light,
            camera: None,
            index: index as u32,
        };
        assert_eq!(
            stats.shadow_visible.get(&(id, h.batch)),
            Some(&expected),
            "face {index}: {:?}",
            stats.shadow_visible
        );
        faces.push(expected);
    }
    // The light hangs above the raised batch: every instance is in some
    // face, and the face looking up keeps none.
    assert!(
        faces.iter().sum::<u32>() >= 144 && faces.contains(&0),
        "{faces:?}"
    );
}

/// Issue 16: the batch casts shadows from a spot light (its one view culled
/// on the GPU like a point light's faces).
#[test]
fn spot_light_shadows_are_cast() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut h, _, _) = shadow_contrast("spot");
    let world = h.app.world_mut();
    let light = world
        .query_filtered::<Entity, With<SpotLight>>()
        .single(world)
        .unwrap();
    let stats = world.resource::<GpuCullStats>();
    let id = ShadowViewId {
        light,
        camera: None,
        index: 0,
    };
    let count = stats.shadow_visible.get(&(id, h.batch)).copied();
    assert!(count.is_some_and(|n| n > 0), "{:?}", stats.shadow_visible);
}

/// The mean red of the pixels that show instances (red well above blue).
fn instance_red(padded: &[u8]) -> f64 {
    let reds: Vec<u64> = instance_pixels(padded).map(|p| p[0] as u64).collect();
    assert!(reds.len() > 50, "only {} instance pixels", reds.len());
    reds.iter().sum::<u64>() as f64 / reds.len() as f64
}

/// The RGBA pixels of a frame read back with padded rows.
fn frame_pixels(padded: &[u8]) -> impl Iterator<Item = &[u8]> {
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let stride = padded.len() / hgt;
    (0..hgt).flat_map(move |y| padded[y * stride..y * stride + w * 4].chunks(4))
}

/// The pixels that are clearly red: the instances' color.
fn instance_pixels(padded: &[u8]) -> impl Iterator<Item = &[u8]> {
    frame_pixels(padded).filter(|p| p[0] as u32 > p[2] as u32 + 30)
}

/// Issue 16: instances receive shadows like Bevy meshes: in the shadow of an
/// ordinary mesh between them and the light they are darker than with the
/// occluder gone (the draw's PBR input sets the shadow-receiver flag).
#[test]
fn instances_receive_shadows_from_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = shadow_scene("directional", false);
    settle_stable(&mut h);
    let lit = instance_red(&h.pixels.lock().unwrap().clone().unwrap());
    // A wide slab over the batch, above the camera's view, between the
    // batch and the light.
    let world = h.app.world_mut();
    let slab = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(60.0, 0.5, 60.0));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::WHITE));
    world.spawn((
        Mesh3d(slab),
        MeshMaterial3d(material),
        Transform::from_xyz(0.0, 14.0, -15.0),
    ));
    let start = std::time::Instant::now();
    let mut shaded = lit;
    while start.elapsed() < SETTLE {
        h.app.update();
        if let Some(padded) = h.pixels.lock().unwrap().clone() {
            shaded = instance_red(&padded);
            if shaded < lit * 0.8 {
                break;
            }
        }
    }
    eprintln!("instances: red {shaded:.1} in the slab's shadow, {lit:.1} in the light");
    assert!(
        shaded < lit * 0.8,
        "instances in a mesh's shadow stay lit: red {shaded:.1} shaded, {lit:.1} lit"
    );
}

/// Issue 16: a batch on another render layer is neither culled nor drawn by
/// a camera that does not see that layer, as with Bevy's meshes.
#[test]
fn render_layers_hide_a_batch_from_other_cameras() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Camera 0 on layer 0 (it is read back), camera 1 on layer 1, both on
    // the grid: Bevy extracts the batch because camera 1 sees it.
    let mut h = harness(None, &[looking_down_grid(), looking_down_grid()]);
    run_until_counts_match(&mut h, "before moving the batch to layer 1");
    let layer_one = bevy::camera::visibility::RenderLayers::layer(1);
    h.app
        .world_mut()
        .entity_mut(h.cameras[1])
        .insert(layer_one.clone());
    h.app.world_mut().entity_mut(h.batch).insert(layer_one);
    // Counts culled before the change may still arrive: wait for counts
    // culled after it (camera 1 keeps culling), forget, and wait again.
    let settle_after = |h: &mut Harness| {
        let changed_at = h.app.world().resource::<GpuCullStats>().render_frame;
        let start = std::time::Instant::now();
        while h.app.world().resource::<GpuCullStats>().counts_frame <= changed_at + 2
            && start.elapsed() < SETTLE
        {
            h.app.update();
        }
    };
    settle_after(&mut h);
    h.app.world_mut().resource_mut::<GpuCullStats>().visible.clear();
    settle_after(&mut h);
    let padded = h.pixels.lock().unwrap().clone().expect("a frame was read back");
    let covered = count_pixels(&padded, 0..HEIGHT as usize, |p| p[0] as u32 > p[2] as u32 + 30);
    let stats = h.app.world().resource::<GpuCullStats>();
    assert!(
        !stats.visible.contains_key(&(h.cameras[0], h.batch)),
        "a layer-0 camera still culls a layer-1 batch"
    );
    assert!(
        stats
            .visible
            .get(&(h.cameras[1], h.batch))
            .is_some_and(|&n| n > 0),
        "the layer-1 camera stopped culling the batch: {:?}",
        stats.visible
    );
    assert_eq!(covered, 0, "a layer-0 camera still draws a layer-1 batch");
}

/// The camera's prepass depth, copied after the prepass (test only).
#[derive(Resource, Clone, Default)]
struct DepthProbe(Arc<Mutex<Option<wgpu::Buffer>>>);

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
fn install_depth_probe(h: &mut Harness) -> DepthProbe {
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
fn prepass_depth(h: &Harness, probe: &DepthProbe) -> Vec<f32> {
    let render_world = h.app.sub_app(bevy::render::RenderApp).world();
    let device = render_world.resource::<bevy::render::renderer::RenderDevice>();
    let queue = render_world.resource::<bevy::render::renderer::RenderQueue>();
    let buffer = probe
        .0
        .lock()
        .unwrap()
        .clone()
        .expect("the prepass depth was copied");
    let bytes =
        cull_core::buffers::read_back(device.wgpu_device(), queue, &buffer, 0, buffer.size()).unwrap();
    (0..(WIDTH * HEIGHT) as usize)
        .map(|i| {
            let (x, y) = (i % WIDTH as usize, i / WIDTH as usize);
            let at = y * DEPTH_ROW as usize + x * 4;
            f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
        })
        .collect()
}

/// Issue 16: a camera with `DepthPrepass` has the instances in its prepass:
/// the prepass depth (reverse-Z, cleared to 0) is set where the frame shows
/// instances.
#[test]
fn depth_prepass_holds_the_instances() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let camera = h.cameras[0];
    h.app
        .world_mut()
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    record_render_errors(&mut h.app);
    let probe = install_depth_probe(&mut h);
    run_until_counts_match(&mut h, "with a depth prepass");
    let frame = assert_renders(&mut h, "with a depth prepass");
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let shown: Vec<usize> = frame
        .chunks(4)
        .enumerate()
        .filter(|(_, p)| is_instance(p))
        .map(|(i, _)| i)
        .collect();
    let depth = prepass_depth(&h, &probe);
    let in_prepass = shown.iter().filter(|&&i| depth[i] > 0.0).count();
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "render errors: {errors:#?}");
    assert!(
        shown.len() > 50 && in_prepass * 10 >= shown.len() * 9,
        "{in_prepass} of {} instance pixels have prepass depth",
        shown.len()
    );
}

/// The batch's instances, all white, so that a material's color shows as
/// it is.
fn white_instances(world: &World, batch: Entity) -> Vec<CulledInstance> {
    world
        .get::<GpuCulledInstances>(batch)
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
fn under_the_sky(instances: Vec<CulledInstance>) -> Vec<CulledInstance> {
    let sky = transform_in_the_sky();
    instances
        .into_iter()
        .map(|i| CulledInstance {
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let texture = flat_texture(world, [20, 220, 40, 255], true);
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color_texture: Some(texture),
            ..default()
        });
    let white: Vec<CulledInstance> = under_the_sky(white_instances(world, h.batch));
    // The entity's own transform puts a would-be copy of the mesh high in
    // the view, where the sky is: it must not appear.
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(material), transform_in_the_sky()));
    world
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(white);
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

/// Issue 16: `CaptureScene` writes the scene file of a (camera, batch) as
/// the plugin culls it; the CPU reference over that file brackets the
/// GPU's count (`replay` runs the same file through every variant).
#[test]
fn capture_writes_a_scene_file_replay_reads() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness(None, &[looking_down_grid()]);
    let counts = run_until_counts_match(&mut h, "before the capture");
    let path = std::env::temp_dir().join("bevy-gpu-cull-capture.json");
    let _ = std::fs::remove_file(&path);
    h.app.world_mut().write_message(CaptureScene {
        camera: h.cameras[0],
        batch: h.batch,
        path: path.clone(),
    });
    h.app.update();
    let text = std::fs::read_to_string(&path).expect("the capture wrote the file");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let floats = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let m = Mat4::from_cols_slice(&floats(&json["clip_from_world"]));
    let center = floats(&json["bounds"]["center"]);
    let radius = json["bounds"]["radius"].as_f64().unwrap() as f32;
    let instances: Vec<cull_core::Instance> = json["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| cull_core::Instance {
            position: Vec3::from_slice(&floats(&i["position"])),
            rotation: Quat::from_slice(&floats(&i["rotation"])),
            scale: i["scale"].as_f64().unwrap() as f32,
        })
        .collect();
    assert_eq!(instances.len(), 1600);
    let format = cull_core::InstanceFormat::PosQuat;
    let reference = cull_core::cpu::classify(
        format,
        &format.encode(&instances).unwrap(),
        cull_core::Sphere::new(Vec3::from_slice(&center), radius),
        &cull_core::Frustum::from_clip_from_world(m, None).unwrap(),
    )
    .unwrap();
    let (sure, maybe) = (reference.visible.len() as u32, reference.borderline.len() as u32);
    assert!(
        sure <= counts[0] && counts[0] <= sure + maybe,
        "GPU {} vs the file's reference {sure} (+{maybe} borderline)",
        counts[0]
    );
}

/// Issue 16: with Bevy's occlusion culling on a camera (which needs its
/// depth prepass), the batch is still culled by the plugin, drawn, and
/// written to the prepass depth Bevy builds its occlusion pyramid from; no
/// render error.
#[test]
fn bevy_occlusion_culling_keeps_the_batch() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    h.app.world_mut().entity_mut(h.cameras[0]).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::render::occlusion_culling::OcclusionCulling,
    ));
    run_until_counts_match(&mut h, "with occlusion culling");
    assert_renders(&mut h, "with occlusion culling");
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// Issue 16: an alpha-masked material (`AlphaMode::Mask`) discards what its
/// texture's alpha masks: a fully transparent texture hides the instances
/// although they are culled, counted and drawn. The same material opaque
/// shows them (an opaque batch's shader has no discard), and switching its
/// alpha mode at run time re-specializes the draw.
#[test]
fn an_alpha_masked_material_discards_masked_fragments() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

fn is_red(p: &[u8]) -> bool {
    p[0] > 60 && p[0] as u32 > p[1] as u32 + 40 && p[0] as u32 > p[2] as u32 + 40
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
    let all: Vec<CulledInstance> = under_the_sky(white_instances(world, h.batch));
    let (left, right): (Vec<_>, Vec<_>) = all.into_iter().partition(|i| i.position.x < 0.0);
    let mesh = world.get::<Mesh3d>(h.batch).unwrap().clone();
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(green), transform_in_the_sky()));
    world
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(left);
    let right = world
        .spawn((
            mesh,
            GpuCulledInstances::new(right),
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
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 16: an `ExtendedMaterial<StandardMaterial, _>` shades the
/// instances: the standard part's base color (yellow), the instance color
/// (white) and the extension's tint (cyan) make green.
#[test]
fn an_extended_standard_material_shades_the_instances() {
    type Extended = bevy::pbr::ExtendedMaterial<StandardMaterial, TintExtension>;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
    let white: Vec<CulledInstance> = white_instances(world, h.batch);
    world.entity_mut(h.batch).insert(MeshMaterial3d(material));
    world
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(white);
    run_until_counts_match(&mut h, "extended material");
    let frame = frame_until(&mut h, |f| count_pixels(f, 0..HEIGHT as usize, is_green) > 200);
    let green = count_pixels(&frame, 0..HEIGHT as usize, is_green);
    assert!(
        green > 200,
        "only {green} pixels show the extended material's green"
    );
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 16: a batch with a blended material (not supported: drawn opaque,
/// with a warning) still draws no extra copy of the mesh at the entity's
/// transform; Bevy queues that copy in a sorted phase, not a binned one.
#[test]
fn a_blended_material_draws_the_batch_opaque_and_no_extra_copy() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::linear_rgba(0.05, 1.0, 0.05, 0.5),
            alpha_mode: AlphaMode::Blend,
            unlit: true,
            ..default()
        });
    let white: Vec<CulledInstance> = under_the_sky(white_instances(world, h.batch));
    world
        .entity_mut(h.batch)
        .insert((MeshMaterial3d(material), transform_in_the_sky()));
    world
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(white);
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

/// Whether every level's GPU count lies within the CPU reference for that
/// level (its clearly kept instances, plus any borderline ones).
fn levels_match(
    batch: &GpuCulledInstances,
    bounds: GpuCullBounds,
    format: InstanceFormat,
    levels: &[cull_core::Frustum],
    got: Option<&Vec<u32>>,
) -> Result<Vec<usize>, String> {
    let got = got.ok_or("no per-level counts yet")?;
    let mut expected = Vec::new();
    for (k, level) in levels.iter().enumerate() {
        let r = batch.reference_on_cpu(bounds, level, format).unwrap();
        let n = *got
            .get(k)
            .ok_or(format!("{} levels counted, {} expected", got.len(), levels.len()))?
            as usize;
        if !(r.visible.len()..=r.visible.len() + r.borderline.len()).contains(&n) {
            return Err(format!(
                "level {k}: {n} drawn, the CPU reference {} (+{} borderline); all: {got:?}",
                r.visible.len(),
                r.borderline.len()
            ));
        }
        expected.push(r.visible.len());
    }
    Ok(expected)
}

/// Issue 17: a batch with levels of detail draws each instance with the
/// mesh its projected size on screen picks, and culls it past the last
/// level. The camera's count per level equals the CPU reference for that
/// level's band, and each shadow cascade draws its casters at the levels
/// the camera chose (the camera's sizes against the cascade's frustum).
#[test]
fn levels_of_detail_split_the_instances_by_screen_size() {
    // The camera sees the grid from 8 to 100 units away: a sphere of radius
    // 0.5 covers from about 0.12 to 0.012 of the screen height there.
    levels_follow_screen_size(|_| vec![0.06, 0.025, 0.012]);
}

/// The most levels a batch may have (`MAX_LOD_LEVELS`, every list of one
/// multi-view cull for the camera): each level's count equals the CPU
/// reference, for the camera and for each cascade, whose 8 levels are
/// culled cascade by cascade (4 cascades' lists would not fit one pass).
#[test]
fn the_most_levels_of_detail_split_the_instances_by_screen_size() {
    levels_follow_screen_size(|sizes| {
        // Between the visible instances' sizes at quantiles, so that each
        // level holds some; the last cuts off the smallest tenth.
        (0..MAX_LOD_LEVELS)
            .map(|k| threshold_at(sizes, 0.9 * (k + 1) as f64 / MAX_LOD_LEVELS as f64))
            .collect()
    });
}

/// A level facing the camera (`LodLevel::facing_camera`, an impostor) draws
/// its flat mesh turned like the view, whatever the instances' rotation:
/// quads that the instances lay flat on the ground cover the pixels of
/// quads each turned by the camera's own rotation (drawn as an ordinary
/// level), several times what they cover lying flat, seen at a grazing
/// angle. The facing level is the second of two (its own level uniform),
/// and the camera has a depth prepass, whose depth the main pass must meet
/// exactly for the pixels to show.
#[test]
fn a_level_facing_the_camera_turns_its_mesh_toward_the_view() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    world
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    let camera_rotation = world.get::<Transform>(camera).unwrap().rotation;
    let sphere = world.get::<Mesh3d>(h.batch).unwrap().0.clone();
    // A quad in the mesh's XY plane.
    let quad = world.resource_mut::<Assets<Mesh>>().add(Rectangle::new(0.6, 0.6));
    let grid = world
        .get::<GpuCulledInstances>(h.batch)
        .unwrap()
        .instances()
        .to_vec();
    let turned =
        |rotation: Quat| -> Vec<CulledInstance> { grid.iter().map(|i| i.with_rotation(rotation)).collect() };
    let flat = Quat::from_rotation_x(-std::f32::consts::FRAC_PI_2);
    // Instances turned by `rotation`, drawn at level 1 (level 0, the
    // sphere, holds nothing that small), facing the camera or not: the
    // pixels that show the quads once the draw has settled.
    let pixels = |h: &mut Harness, rotation: Quat, facing: bool| -> Vec<bool> {
        let level = LodLevel::new(quad.clone(), 0.0);
        let level = if facing { level.facing_camera() } else { level };
        let world = h.app.world_mut();
        world
            .get_mut::<GpuCulledInstances>(h.batch)
            .unwrap()
            .replace(turned(rotation));
        world
            .entity_mut(h.batch)
            .insert(GpuCullLod::new([LodLevel::new(sphere.clone(), 10.0), level]));
        run_until_counts_match(h, "quads");
        settled_red_pixels(h)
    };
    let count = |p: &[bool]| p.iter().filter(|p| **p).count();
    let lying = pixels(&mut h, flat, false);
    let facing = pixels(&mut h, flat, true);
    let turned_like_the_camera = pixels(&mut h, camera_rotation, false);
    let lying_again = pixels(&mut h, flat, false);
    let (n_lying, n_facing, n_turned) = (count(&lying), count(&facing), count(&turned_like_the_camera));
    assert!(n_lying > 20, "only {n_lying} pixels show the flat quads");
    assert!(
        n_facing > 2 * n_lying,
        "quads facing the camera cover {n_facing} pixels, lying flat {n_lying}"
    );
    // The same pixels as quads turned like the camera, but for rounding
    // along their edges (a matrix against a quaternion).
    let differ = facing
        .iter()
        .zip(&turned_like_the_camera)
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        differ * 50 <= n_turned,
        "{differ} pixels differ between quads facing the camera ({n_facing}) and quads turned like it ({n_turned})"
    );
    assert_eq!(lying_again, lying, "the level no longer faces the camera");
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 17 (cross-fade): levels that cross-fade keep an instance in both
/// levels across the fade (each level's count equals the CPU reference for
/// overlapping bands), and split its pixels between the two. With a large
/// quad as the fine level and a small one as the coarse level, both facing
/// the camera, under a depth prepass: the frame shows every pixel that the
/// levels switching at the fade's top end show (no holes where the levels
/// hand over), none that switching at its bottom end does not show, and
/// of the pixels between the two a share: the large quads' rings across
/// the fade are dithered out in part, in the depth prepass as in the main
/// pass. Culled in the packed format, both
/// levels are drawn in full across the fade instead.
#[test]
fn levels_that_cross_fade_split_their_pixels_between_them() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut h, metric, bounds, sizes) = grid_sizes();
    let camera = h.cameras[0];
    let probe = install_depth_probe(&mut h);
    let world = h.app.world_mut();
    world
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    const FADE: f32 = 0.5;
    let threshold = threshold_at(&sizes, 0.6);
    // Corners within the bounds' radius (0.5): the quads turn about their
    // centre.
    let mut meshes = world.resource_mut::<Assets<Mesh>>();
    let large = meshes.add(Rectangle::new(0.7, 0.7));
    let small = meshes.add(Rectangle::new(0.35, 0.35));
    let lod = |threshold: f32, fade: f32| {
        GpuCullLod::new([
            LodLevel::new(large.clone(), threshold).facing_camera(),
            LodLevel::new(small.clone(), 0.0).facing_camera(),
        ])
        .with_cross_fade(fade)
    };
    // The pixels that show the quads once the draw has settled, after the
    // counts match the reference for overlapping levels when `check` asks.
    let shown = |h: &mut Harness, lod: GpuCullLod, check: bool| -> Vec<bool> {
        h.app.world_mut().entity_mut(h.batch).insert(lod.clone());
        let start = std::time::Instant::now();
        if check {
            loop {
                h.app.update();
                let world = h.app.world_mut();
                let thresholds: Vec<f32> = lod.levels.iter().map(|l| l.min_screen_size).collect();
                let levels = camera_frustum(world, camera)
                    .detail_levels_overlapping(metric, &thresholds, lod.cross_fade)
                    .unwrap();
                let format = world.resource::<GpuCullSettings>().format;
                let batch = world.get::<GpuCulledInstances>(h.batch).unwrap().clone();
                let stats = world.resource::<GpuCullStats>().clone();
                match levels_match(
                    &batch,
                    bounds,
                    format,
                    &levels,
                    stats.visible_per_level.get(&(camera, h.batch)),
                ) {
                    Ok(expected) => {
                        let plain = batch
                            .reference_on_cpu(bounds, &camera_frustum(world, camera), format)
                            .unwrap()
                            .visible
                            .len();
                        // Both levels hold instances of their own, and some
                        // instances are in both (in the fade).
                        let both = expected[0] + expected[1] - plain;
                        assert!(
                            both > 0 && expected[0] > both && expected[1] > both,
                            "levels {expected:?} of {plain} instances: none or all in the fade"
                        );
                        break;
                    }
                    Err(e) if start.elapsed() > SETTLE => panic!("cross-fade counts: {e}"),
                    Err(_) => {}
                }
            }
        }
        settled_red_pixels(h)
    };
    let count = |p: &[bool]| p.iter().filter(|p| **p).count();
    let switch_low = shown(&mut h, lod(threshold, 0.0), false);
    let faded = shown(&mut h, lod(threshold, FADE), true);
    // The depth prepass keeps the pixels the main pass keeps: depth is set
    // (reverse-Z, cleared to 0) exactly where the faded frame shows quads.
    let depth = prepass_depth(&h, &probe);
    let differ = faded
        .iter()
        .zip(&depth)
        .filter(|(shown, depth)| **shown != (**depth > 0.0))
        .count();
    assert!(
        differ <= 2,
        "{differ} pixels differ between the prepass depth and the faded frame ({} pixels)",
        faded.iter().filter(|p| **p).count()
    );
    let switch_high = shown(&mut h, lod(threshold * (1.0 + FADE), 0.0), false);
    let (low, fade, high) = (count(&switch_low), count(&faded), count(&switch_high));
    let holes = switch_high
        .iter()
        .zip(&faded)
        .filter(|(h, f)| **h && !**f)
        .count();
    let extra = faded.iter().zip(&switch_low).filter(|(f, l)| **f && !**l).count();
    assert_eq!(
        holes, 0,
        "pixels that both levels leave out: {high} shown switching above the fade, {fade} faded"
    );
    assert_eq!(
        extra, 0,
        "pixels shown only in the fade: {fade} faded, {low} switching below it"
    );
    assert!(
        low > high + 20,
        "the fade covers too few pixels: {low} switching below it, {high} above"
    );
    let share = (fade - high) as f64 / (low - high) as f64;
    assert!(
        (0.15..=0.85).contains(&share),
        "the fade shows {share:.2} of the pixels between switching above it ({high}) and below it ({low}): {fade}"
    );
    // Culled in the packed format, whose spheres the draw cannot size, both
    // levels are drawn in full across the fade: the pixels of switching
    // below it (the small quads lie inside the large ones).
    h.app.world_mut().resource_mut::<GpuCullSettings>().format = InstanceFormat::Packed16;
    let packed_low = shown(&mut h, lod(threshold, 0.0), false);
    let packed_faded = shown(&mut h, lod(threshold, FADE), true);
    assert!(count(&packed_low) > high, "packed: {} pixels", count(&packed_low));
    assert!(
        packed_faded == packed_low,
        "packed: the fade dithers ({} pixels, {} switching below it)",
        count(&packed_faded),
        count(&packed_low)
    );
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Which pixels of the frame are red once the draw has settled: some, and
/// the same for 10 frames (a new mesh and pipeline may take frames to be
/// ready).
fn settled_red_pixels(h: &mut Harness) -> Vec<bool> {
    let (mut last, mut same) = (Vec::new(), 0);
    let start = std::time::Instant::now();
    while !(last.contains(&true) && same >= 10) && start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        let shown: Vec<bool> = frame_rows(&padded, 0..HEIGHT as usize).map(is_red).collect();
        same = if shown == last { same + 1 } else { 0 };
        last = shown;
    }
    last
}

/// `harness_with`'s grid seen by `looking_down_grid`, once the batch has
/// its bounds (from its mesh, after the app has run), with the camera's
/// size metric and the sizes of the instances in its view, largest first.
fn grid_sizes() -> (Harness, cull_core::SizeMetric, GpuCullBounds, Vec<f64>) {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    while h.app.world().get::<GpuCullBounds>(h.batch).is_none() {
        h.app.update();
    }
    let world = h.app.world_mut();
    let metric = camera_metric(world, camera);
    let frustum = camera_frustum(world, camera);
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let mut sizes: Vec<f64> = world
        .get::<GpuCulledInstances>(h.batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| (i.position + bounds.center * i.scale, bounds.radius * i.scale))
        .filter(|(center, radius)| frustum.intersects_sphere(*center, *radius))
        .map(|(center, radius)| metric.size(center, radius))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    (h, metric, bounds, sizes)
}

/// The size metric of `camera`'s projection and transform.
fn camera_metric(world: &mut World, camera: Entity) -> cull_core::SizeMetric {
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    cull_core::SizeMetric::from_view(cam.clip_from_view(), transform.to_matrix())
}

/// A threshold halfway between two neighbouring sizes at quantile `q` of
/// `sizes` (largest first), so that no instance sits on it.
fn threshold_at(sizes: &[f64], q: f64) -> f32 {
    let j = ((q * sizes.len() as f64) as usize).min(sizes.len() - 2);
    (0.5 * (sizes[j] + sizes[j + 1])) as f32
}

/// Gives the batch of `harness_with`'s grid, seen by `looking_down_grid`,
/// levels of detail at the thresholds `pick` chooses from the sizes of the
/// instances in view (largest first), and checks each level's count for the
/// camera alone, then with shadows for each cascade too.
fn levels_follow_screen_size(pick: impl Fn(&[f64]) -> Vec<f32>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (mut h, metric, _, sizes) = grid_sizes();
    let camera = h.cameras[0];
    let thresholds = pick(&sizes);
    let world = h.app.world_mut();
    let mut meshes = world.resource_mut::<Assets<Mesh>>();
    let level_meshes: Vec<Handle<Mesh>> = (0..thresholds.len())
        .map(|k| match k % 3 {
            0 => meshes.add(Sphere::new(0.5).mesh().ico(1).unwrap()),
            1 => meshes.add(Sphere::new(0.5).mesh().ico(0).unwrap()),
            _ => meshes.add(Cuboid::new(0.8, 0.8, 0.8)),
        })
        .collect();
    world.entity_mut(h.batch).insert(GpuCullLod::new(
        level_meshes.into_iter().zip(thresholds.iter().copied()),
    ));
    let check = |world: &mut World, shadows: bool| -> Result<(), String> {
        let frustum = camera_frustum(world, camera);
        let levels = frustum.detail_levels(metric, &thresholds).unwrap();
        let format = world.resource::<GpuCullSettings>().format;
        let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
        let batch = world.get::<GpuCulledInstances>(h.batch).unwrap().clone();
        let stats = world.resource::<GpuCullStats>().clone();
        let expected = levels_match(
            &batch,
            bounds,
            format,
            &levels,
            stats.visible_per_level.get(&(camera, h.batch)),
        )?;
        assert!(
            expected.iter().all(|n| *n > 0),
            "every level should hold instances in this view: {expected:?}"
        );
        if !shadows {
            return Ok(());
        }
        let (light, cascades) = world
            .query::<(Entity, &bevy::light::Cascades)>()
            .single(world)
            .unwrap();
        let cascades = cascades.cascades.get(&camera).ok_or("no cascades yet")?.clone();
        for (index, cascade) in cascades.iter().enumerate() {
            let frustum = cull_core::Frustum::from_shadow_cascade(cascade.clip_from_world).unwrap();
            let levels = frustum.detail_levels(metric, &thresholds).unwrap();
            let id = ShadowViewId {
                light,
                camera: Some(camera),
                index: index as u32,
            };
            levels_match(
                &batch,
                bounds,
                format,
                &levels,
                stats.shadow_visible_per_level.get(&(id, h.batch)),
            )
            .map_err(|e| format!("cascade {index}: {e}"))?;
        }
        Ok(())
    };
    // Without shadows, the camera is culled alone, with one frustum test
    // for all its levels (VisibilityTest::DetailLevels); with them, together
    // with its cascades, each view's levels with their own frustum test.
    // First without: the first counts come from the first kernel.
    for shadows in [false, true] {
        let world = h.app.world_mut();
        for mut light in world.query::<&mut DirectionalLight>().iter_mut(world) {
            light.shadow_maps_enabled = shadows;
        }
        let start = std::time::Instant::now();
        loop {
            h.app.update();
            match check(h.app.world_mut(), shadows) {
                Ok(()) => break,
                Err(e) if start.elapsed() > SETTLE => panic!("shadows {shadows}: {e}"),
                Err(_) => {}
            }
        }
    }
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 17: a point light's six faces draw a batch with levels of detail
/// at the levels the camera chose: each face's count per level equals the
/// CPU reference for the face's frustum with the camera's sizes.
#[test]
fn point_light_faces_take_the_cameras_levels_of_detail() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = shadow_scene("point", true);
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    let metric = camera_metric(world, camera);
    // Thresholds between the instances' sizes, so that each level holds some.
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCulledInstances>(h.batch).unwrap().clone();
    let mut sizes: Vec<f64> = batch
        .instances()
        .iter()
        .map(|i| metric.size(i.position + bounds.center * i.scale, bounds.radius * i.scale))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    let thresholds = [threshold_at(&sizes, 0.25), threshold_at(&sizes, 0.6), 0.0];
    let mesh = world.get::<Mesh3d>(h.batch).unwrap().0.clone();
    let coarse = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.5).mesh().ico(0).unwrap());
    let cube = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.8, 0.8, 0.8));
    world.entity_mut(h.batch).insert(GpuCullLod::new([
        (mesh, thresholds[0]),
        (coarse, thresholds[1]),
        (cube, thresholds[2]),
    ]));
    let check = |world: &mut World| -> Result<(), String> {
        let (light, light_transform, point) = world
            .query::<(Entity, &GlobalTransform, &PointLight)>()
            .single(world)
            .unwrap();
        let (position, near, range) = (
            light_transform.translation(),
            point.shadow_map_near_z,
            point.range,
        );
        let format = world.resource::<GpuCullSettings>().format;
        let stats = world.resource::<GpuCullStats>().clone();
        let projection = Mat4::perspective_infinite_reverse_rh(std::f32::consts::FRAC_PI_2, 1.0, near);
        let mut drawn = 0;
        for (index, face) in bevy::camera::primitives::CUBE_MAP_FACES.iter().enumerate() {
            let world_from_view = GlobalTransform::from_translation(position)
                * Transform::IDENTITY.looking_at(face.target, face.up);
            let frustum =
                cull_core::Frustum::from_view(projection, world_from_view.to_matrix(), Some(range)).unwrap();
            let levels = frustum.detail_levels(metric, &thresholds).unwrap();
            let id = ShadowViewId {
                light,
                camera: None,
                index: index as u32,
            };
            let expected = levels_match(
                &batch,
                bounds,
                format,
                &levels,
                stats.shadow_visible_per_level.get(&(id, h.batch)),
            )
            .map_err(|e| format!("face {index}: {e}"))?;
            drawn += expected.iter().filter(|n| **n > 0).count();
        }
        // The faces together draw more than one level.
        if drawn < 2 {
            return Err(format!("only {drawn} (face, level) lists hold instances"));
        }
        Ok(())
    };
    let start = std::time::Instant::now();
    loop {
        h.app.update();
        match check(h.app.world_mut()) {
            Ok(()) => break,
            Err(e) if start.elapsed() > SETTLE => panic!("{e}"),
            Err(_) => {}
        }
    }
}

/// A deferred camera draws a batch whose material renders forward (the
/// default) in its forward passes, as it draws such a mesh, with no render
/// error. (A deferred material's batch goes into the G-buffer: like_bevy.)
#[test]
fn a_deferred_camera_draws_a_forward_batch_in_the_forward_passes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    h.app.world_mut().entity_mut(h.cameras[0]).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::core_pipeline::prepass::DeferredPrepass,
    ));
    run_until_counts_match(&mut h, "with a deferred camera");
    assert_renders(&mut h, "with a deferred camera");
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "render errors: {errors:#?}");
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

/// Pixels whose color differs by more than a few steps between two frames.
fn changed_pixels(a: &[u8], b: &[u8]) -> usize {
    frame_pixels(a)
        .zip(frame_pixels(b))
        .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 8))
        .count()
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let flat = red_with_normal_map([128, 128, 255, 255]);
    let tilted = red_with_normal_map([255, 128, 30, 255]);
    eprintln!("normal map: red {flat:.1} flat, {tilted:.1} tilted");
    assert!(
        (flat - tilted).abs() > flat * 0.1,
        "the normal map changes nothing: red {flat:.1} flat, {tilted:.1} tilted"
    );
}

/// Edits upload only the instances they touch, and the counts follow them.
#[test]
fn edits_upload_only_what_changed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness(None, &[looking_down_grid()]);
    let before = run_until_counts_match(&mut h, "initial")[0];
    let uploaded = |h: &Harness| h.app.world().resource::<GpuCullStats>().uploaded_instances;
    assert_eq!(uploaded(&h), 1600, "the new batch goes up whole, once");
    // Move an instance that is out of view in front of the camera.
    let hidden = {
        let camera = h.cameras[0];
        let world = h.app.world_mut();
        let frustum = camera_frustum(world, camera);
        let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
        let batch = world.get::<GpuCulledInstances>(h.batch).unwrap();
        let visible = batch
            .visible_on_cpu(bounds, &frustum, InstanceFormat::PosQuat)
            .unwrap();
        (0..batch.len() as u32)
            .find(|i| !visible.contains(i))
            .expect("the camera does not see the whole grid") as usize
    };
    let mut batch = h.app.world_mut().get_mut::<GpuCulledInstances>(h.batch).unwrap();
    let mut moved = batch.instances()[hidden];
    moved.position = Vec3::new(0.0, 0.0, 2.0);
    batch.set(hidden, moved);
    let after = run_until_counts_match(&mut h, "after moving one instance")[0];
    assert_eq!(after, before + 1, "the moved instance is now visible");
    assert_eq!(uploaded(&h), 1601, "one instance uploaded");
    // Edit a range in place, then append within the capacity (2048).
    for instance in h
        .app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .edit(100..110)
    {
        instance.position.y += 50.0; // lifted out of view
    }
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .extend((0..3).map(|i| CulledInstance::new(Vec3::new(i as f32, 1.0, 0.0), LinearRgba::WHITE)));
    run_until_counts_match(&mut h, "after editing and appending");
    assert_eq!(uploaded(&h), 1601 + 10 + 3);
    // Frames with no edits upload nothing.
    for _ in 0..5 {
        h.app.update();
    }
    assert_eq!(uploaded(&h), 1614);
}

/// An HDR camera with 4x MSAA: the pipeline is specialized for the view's
/// sample count and HDR target, and the instances show after tonemapping.
#[test]
fn hdr_msaa_camera_renders() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let camera = looking_down_grid();
    let mut h = harness_with(None, &[camera], CameraSetup::HdrMsaa4);
    // An unlit green Bevy mesh in front of the left half of the view: the
    // instances behind it must be depth-tested away. The view is 2 * 3 *
    // tan(22.5 deg) * 1.5 = 3.7 wide at distance 3; the box spans from its
    // left edge to 0.1 left of the center.
    let world = h.app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(2.0, 3.0, 0.05));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgb(0.0, 1.0, 0.0),
            unlit: true,
            ..default()
        });
    let center = camera.translation + camera.forward() * 3.0 + camera.left() * 1.1;
    world.spawn((
        Mesh3d(mesh),
        MeshMaterial3d(material),
        Transform::from_translation(center).with_rotation(camera.rotation),
    ));
    run_until_counts_match(&mut h, "HDR + MSAA");
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let is_green = |p: &[u8]| p[1] > 100 && p[1] as u32 > p[0] as u32 + 80;
    let pixels = assert_renders_when(&mut h, "HDR MSAA4", |pixels| {
        let p = (hgt / 2 * w + w / 8) * 4;
        is_green(&pixels[p..p + 4])
    });
    let pixel = |x: usize, y: usize| &pixels[(y * w + x) * 4..(y * w + x) * 4 + 4];
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let left: Vec<&[u8]> = (0..hgt).map(|y| pixel(w / 8, y)).collect();
    assert!(
        left.iter().all(|p| is_green(p)),
        "the occluder covers the left edge: {left:?}"
    );
    let occluded_instances = (0..hgt)
        .flat_map(|y| (0..w / 2 - 4).map(move |x| (x, y)))
        .filter(|&(x, y)| is_instance(pixel(x, y)))
        .count();
    assert_eq!(occluded_instances, 0, "instances show through a nearer Bevy mesh");
    let right_instances = (hgt / 2..hgt)
        .flat_map(|y| (w / 2 + 4..w).map(move |x| (x, y)))
        .filter(|&(x, y)| is_instance(pixel(x, y)))
        .count();
    assert!(
        right_instances > 100,
        "instances show right of the occluder: {right_instances}"
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
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(
        None,
        &[looking_down_grid()],
        CameraSetup::CustomShader(USER_COLOR_SHADER),
    );
    for instance in h
        .app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
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

/// Renders (at most 300 frames) until more than `enough` pixels of the
/// first camera's frame, in columns `columns`, pass `matches`; returns how
/// many did in the last frame read back.
fn render_until_pixels(
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

/// After a device loss Bevy re-creates the device and runs `RenderStartup`
/// again. The plugin's part of that is tested here by running `RenderStartup`
/// again on the same device: the culler and buffers are rebuilt, the batch goes
/// up whole again, and counts and pixels come back. (Destroying the device
/// itself is not testable with Bevy 0.19.1: Bevy's own uniform uploads panic
/// on a destroyed device before its error handler runs.)
#[test]
fn render_startup_rebuilds_gpu_state() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    run_until_counts_match(&mut h, "before");
    assert_eq!(h.app.world().resource::<GpuCullStats>().uploaded_instances, 1600);
    h.app
        .sub_app_mut(bevy::render::RenderApp)
        .world_mut()
        .run_schedule(bevy::render::RenderStartup);
    h.app.world_mut().resource_mut::<GpuCullStats>().visible.clear();
    *h.pixels.lock().unwrap() = None;
    run_until_counts_match(&mut h, "after RenderStartup ran again");
    assert_eq!(
        h.app.world().resource::<GpuCullStats>().uploaded_instances,
        3200,
        "the batch went up again, whole"
    );
    assert_renders(&mut h, "after RenderStartup");
}

/// wgpu's GL backend (llvmpipe through EGL) has no subgroups: the default
/// settings must pick a variant that runs there, and the batch still renders.
/// Bevy reads `WGPU_BACKEND` when it starts, so this runs in a child process.
#[test]
fn gl_backend_renders() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "gl_backend_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WGPU_BACKEND", "gl")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child prints GL_CHILD_PASSED after its last check, then exits at
    // once; Mesa's GL driver has still crashed in its exit handlers now and
    // then (glibc's heap check in malloc_consolidate), so a crash after the
    // marker is reported, not failed on.
    assert!(
        out.status.success() || text.contains(GL_CHILD_PASSED),
        "the GL child failed (needs libegl-mesa0 and libgl1-mesa-dri):\n{text}"
    );
    if !out.status.success() {
        eprintln!(
            "the GL child passed every check, then crashed at exit ({}):\n{text}",
            out.status
        );
    }
    assert!(
        text.contains(GL_CHILD_PASSED),
        "the GL child did not finish its checks:\n{text}"
    );
}

/// Printed by the GL child when every check passed, before it exits.
const GL_CHILD_PASSED: &str = "gl child: every check passed";

#[test]
#[ignore = "run by gl_backend_renders with WGPU_BACKEND=gl"]
fn gl_backend_child() {
    assert_eq!(std::env::var("WGPU_BACKEND").as_deref(), Ok("gl"));
    let mut h = harness(None, &[looking_down_grid()]);
    // Bevy 0.19's own depth-downsampling compute shader (occlusion culling's
    // mip chain, compiled whether or not a camera uses it) fails to
    // translate on llvmpipe's GL (`textureGatherOffset` on a shadow
    // sampler), which by default quits the app a few frames in. Record
    // render errors instead, and allow that one alone.
    record_render_errors(&mut h.app);
    run_until_counts_match(&mut h, "GL backend");
    let info = h
        .app
        .world()
        .resource::<bevy::render::renderer::RenderAdapterInfo>()
        .clone();
    assert_eq!(info.backend, wgpu::Backend::Gl, "{}", info.name);
    let variant = h
        .app
        .world()
        .resource::<GpuCullStats>()
        .variant
        .expect("a variant ran");
    assert!(
        variant.required_features().is_empty(),
        "{variant:?} needs subgroups"
    );
    assert_renders(&mut h, "GL backend");
    // Issue 17: occlusion culling asked for where the device cannot build
    // depth pyramids falls back to frustum culling, says why, and still
    // draws every instance in the frustum.
    let camera = h.cameras[0];
    h.app.world_mut().entity_mut(camera).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::render::occlusion_culling::OcclusionCulling,
        GpuCullOcclusion,
    ));
    let why = h
        .app
        .world()
        .resource::<GpuCullStats>()
        .occlusion_unavailable
        .clone()
        .expect("GL reports that it cannot occlusion-cull");
    assert!(why.contains("depth pyramid"), "{why}");
    // Frames for the components to reach the render world, so that the
    // counts compared are culled with them.
    for _ in 0..20 {
        h.app.update();
    }
    run_until_counts_match(&mut h, "GL backend with GpuCullOcclusion");
    assert_renders(&mut h, "GL backend with GpuCullOcclusion");
    run_until_counts_match(&mut h, "GL backend with GpuCullOcclusion, rendered");
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(
        errors.iter().all(|e| e.contains("textureGatherOffset")),
        "render errors other than Bevy's depth-downsampling shader on GL: {errors:#?}"
    );
    // Exit now: tearing down Bevy's GL app with that failed pipeline has
    // crashed inside Mesa's GL driver at exit (a heap check in
    // malloc_consolidate, now and then, after every check had passed).
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{GL_CHILD_PASSED}");
    let _ = out.flush();
    std::process::exit(0);
}

/// Issue 14, item 3: `Packed16` stores no scale, yet the draw scales each
/// instance. Spheres drawn at scale 3 whose centers lie just outside the
/// view's left edge poke into it: the cull must keep them (an unscaled cull
/// drops every one), the count must equal the CPU reference for the scaled
/// spheres, and the pixels at the left edge must show them.
#[test]
fn packed16_culls_scaled_instances_like_the_draw() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let camera = Transform::from_xyz(0.0, 0.0, 0.0).looking_at(Vec3::NEG_Z, Vec3::Y);
    let mut h = harness(None, &[camera]);
    h.app.world_mut().resource_mut::<GpuCullSettings>().format = InstanceFormat::Packed16;
    // Frames until the camera has its projection and the batch its bounds.
    for _ in 0..10 {
        h.app.update();
        if h.app.world().get::<GpuCullBounds>(h.batch).is_some() {
            break;
        }
    }
    let frustum = camera_frustum(h.app.world_mut(), h.cameras[0]);
    let left = frustum.planes()[0];
    let (normal, d) = (left.truncate(), left.w);
    let radius = h
        .app
        .world()
        .get::<GpuCullBounds>(h.batch)
        .expect("bounds computed")
        .radius;
    // Centers 1.2 radii outside the left plane: the unit sphere misses the
    // view, the sphere at scale 3 reaches 1.8 radii into it.
    let edge: Vec<CulledInstance> = (0..12)
        .map(|k| {
            let on_axis = Vec3::new(0.0, (k as f32 - 5.5) * 0.3, -6.0 - k as f32 * 0.25);
            let on_plane = on_axis - normal * (normal.dot(on_axis) + d);
            let mut i = CulledInstance::new(on_plane - normal * 1.2 * radius, LinearRgba::rgb(1.0, 0.2, 0.1));
            i.scale = 3.0;
            i
        })
        .collect();
    let unscaled_visible = edge
        .iter()
        .filter(|i| frustum.intersects_sphere(i.position, radius))
        .count();
    assert_eq!(unscaled_visible, 0, "the test places every unit sphere outside");
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .replace(edge.clone());
    let counts = run_until_counts_match(&mut h, "packed16 at scale 3");
    assert_eq!(counts, vec![12], "every scaled sphere reaches into the view");
    // The left pixel columns show instances.
    let hgt = HEIGHT as usize;
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let edge_pixels = render_until_pixels(&mut h, 0..2, is_instance, hgt / 4);
    assert!(
        edge_pixels > hgt / 4,
        "only {edge_pixels} pixels of the left edge show the scaled instances"
    );
    // Sorted into cells: the cells' bounds cover the scaled spheres too
    // (computed with the cull's bounds, not the mesh's). The twelve at one
    // place, so that their cell is no larger than one of them.
    let (camera, batch) = (h.cameras[0], h.batch);
    let cluster = vec![edge[5]; 12];
    h.app.world_mut().entity_mut(batch).insert((
        GpuCulledInstances::new(cluster),
        GpuCullCells { min_skipped_bytes: 0 },
    ));
    let start = std::time::Instant::now();
    while !h
        .app
        .world()
        .resource::<GpuCullStats>()
        .cells
        .get(&(camera, batch))
        .is_some_and(|c| c.by_cells)
    {
        assert!(start.elapsed() < SETTLE, "never culled by cells");
        h.app.update();
    }
    let counts = run_until_counts_match(&mut h, "packed16 at scale 3, by cells");
    assert_eq!(
        counts,
        vec![12],
        "by cells, every scaled sphere reaches into the view"
    );
}

/// Frames that change nothing write no draw arguments (issue 15: they were
/// written for every view and batch every frame); a new camera writes its own.
#[test]
fn unchanged_frames_write_no_draw_arguments() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness(None, &[looking_down_grid()]);
    run_until_counts_match(&mut h, "start");
    // Bevy's diagnostic: the writes since the previous culled frame, one
    // measurement per culled frame.
    let writes = |h: &Harness| -> Vec<f64> {
        let store = h.app.world().resource::<bevy::diagnostic::DiagnosticsStore>();
        let diagnostic = store.get(&GpuCullPlugin::DRAW_ARGS_WRITES).expect("registered");
        diagnostic.values().copied().collect()
    };
    let before: f64 = writes(&h).iter().sum();
    assert!(before >= 1.0, "the target's arguments were written once");
    for _ in 0..20 {
        h.app.update();
    }
    // Every frame culls: the latest ten measurements are of those frames.
    let after = writes(&h);
    let latest = &after[after.len().saturating_sub(10)..];
    assert!(
        latest.len() == 10 && latest.iter().all(|&w| w == 0.0),
        "unchanged frames wrote draw arguments: {after:?}"
    );
}

/// A view whose matrices give no frustum (here a NaN override) is culled
/// with one that keeps everything: every instance is counted and drawn,
/// never last frame's survivors.
#[test]
fn a_view_without_a_frustum_draws_everything() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness(None, &[looking_down_grid()]);
    run_until_counts_match(&mut h, "before");
    h.app
        .world_mut()
        .entity_mut(h.cameras[0])
        .insert(CullingFrustumOverride {
            clip_from_world: Mat4::NAN,
        });
    let total = h.app.world().get::<GpuCulledInstances>(h.batch).unwrap().len() as u32;
    let mut count = None;
    for _ in 0..60 {
        h.app.update();
        count = h
            .app
            .world()
            .resource::<GpuCullStats>()
            .visible
            .get(&(h.cameras[0], h.batch))
            .copied();
        if count == Some(total) {
            break;
        }
    }
    assert_eq!(count, Some(total), "every instance kept");
}

/// wgpu errors Bevy caught during a test (see [`record_render_errors`]).
static RENDER_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Routes Bevy's render errors (wgpu validation, out of memory, device
/// loss) into [`RENDER_ERRORS`] instead of quitting, so a test can assert
/// there were none.
fn record_render_errors(app: &mut App) {
    use bevy::render::error_handler::{RenderErrorHandler, RenderErrorPolicy};
    // Each test that records starts from none (tests run one app at a time).
    RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    app.insert_resource(RenderErrorHandler(|error, _, _| {
        RENDER_ERRORS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{:?}: {}", error.ty, error.description));
        RenderErrorPolicy::Ignore
    }));
}

/// Whether every (camera, batch) count equals the CPU reference for the
/// current format; the first mismatch otherwise.
fn counts_match(h: &mut Harness, cameras: &[Entity], batches: &[Entity]) -> Result<(), String> {
    let world = h.app.world_mut();
    let format = world.resource::<GpuCullSettings>().format;
    for &camera in cameras {
        let frustum = camera_frustum(world, camera);
        for &batch in batches {
            let Some(bounds) = world.get::<GpuCullBounds>(batch).copied() else {
                return Err(format!("batch {batch} has no bounds yet"));
            };
            let instances = world.get::<GpuCulledInstances>(batch).unwrap();
            let expected = instances.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
            let got = world
                .resource::<GpuCullStats>()
                .visible
                .get(&(camera, batch))
                .copied();
            // A format without scale culls with the batch's scale range, which
            // edits only widen until the next whole-list change: never fewer
            // than the reference (with the current range), maybe more.
            let ok = match got {
                Some(got) if format.carries_scale() => got == expected,
                Some(got) => got >= expected && got as usize <= instances.len(),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "camera {camera}, batch {batch} ({format:?}): GPU {got:?}, CPU reference {expected}"
                ));
            }
        }
    }
    Ok(())
}

/// Runs frames with no changes until every count matches the reference.
fn settle_counts(h: &mut Harness, cameras: &[Entity], batches: &[Entity], what: &str) {
    let mut last = Ok(());
    for _ in 0..150 {
        h.app.update();
        last = counts_match(h, cameras, batches);
        if last.is_ok() {
            // Two more frames: counts from before the last change may still arrive.
            h.app.update();
            h.app.update();
            if counts_match(h, cameras, batches).is_ok() {
                return;
            }
        }
    }
    panic!("{what}: {}", last.unwrap_err());
}

/// A soak test of the plugin (issue 14): frames in which batches are
/// spawned, despawned, grown, shrunk and edited, cameras added and removed,
/// and the variant and format switched every few frames. No wgpu error may
/// occur, the visible counts must equal the CPU reference at checkpoints,
/// and the plugin's GPU buffer memory must return to its starting level
/// once the churn stops. `SOAK_FRAMES` sets the length (default 2000; see
/// docs/bevy-plugin.md for the longer run).
#[test]
fn soak_churn_keeps_counts_and_returns_memory() {
    use cull_core::scene::SceneRng;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let frames: usize = std::env::var("SOAK_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let started = std::time::Instant::now();
    let mut h = harness(None, &[looking_down_grid()]);
    record_render_errors(&mut h.app);
    let main_camera = h.cameras[0];
    let original = h.app.world().get::<GpuCulledInstances>(h.batch).unwrap().clone();
    run_until_counts_match(&mut h, "soak start");
    for _ in 0..4 {
        h.app.update();
    }
    let baseline = h.app.world().resource::<GpuCullStats>().gpu_buffer_bytes;
    assert!(baseline > 0, "the plugin reports its buffers");

    let mesh = h.app.world().get::<Mesh3d>(h.batch).unwrap().0.clone();
    let mut rng = SceneRng::new(0x50A4);
    let variants: Vec<Option<ScanVariant>> = std::iter::once(None)
        .chain(ScanVariant::compiled().map(Some))
        .collect();
    // Each batch draws its instances' scales from its own range, so a packed
    // batch's covering bounds are exercised by every kind of edit.
    let mut batches: Vec<(Entity, f32)> = vec![(h.batch, 1.0)];
    let mut cameras: Vec<Entity> = vec![main_camera];
    let instance = |rng: &mut SceneRng, scale: f32| {
        let mut i = CulledInstance::new(
            Vec3::new(
                rng.range(-40.0, 40.0),
                rng.range(-1.0, 1.0),
                rng.range(-80.0, 5.0),
            ),
            LinearRgba::rgb(1.0, 0.2, 0.1),
        );
        i.scale = scale * rng.range(0.5, 2.0);
        // Rotations of any length: normalized for cull and draw alike.
        i.rotation = Quat::from_xyzw(
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            1.0,
        );
        i
    };
    let (mut checkpoints, mut switches) = (0, 0);
    for frame in 0..frames {
        let pick = |rng: &mut SceneRng, n: usize| (rng.unit() * n as f32) as usize % n.max(1);
        if frame % 7 == 0 && batches.len() < 6 {
            let scale = rng.range(0.5, 2.0);
            let n = pick(&mut rng, 800);
            let list = (0..n).map(|_| instance(&mut rng, scale)).collect();
            let entity = h
                .app
                .world_mut()
                .spawn((Mesh3d(mesh.clone()), GpuCulledInstances::new(list)))
                .id();
            batches.push((entity, scale));
        }
        if frame % 11 == 5 && batches.len() > 1 {
            let (entity, _) = batches.remove(1 + pick(&mut rng, batches.len() - 1));
            h.app.world_mut().despawn(entity);
        }
        if frame % 3 == 1 {
            let (entity, scale) = batches[pick(&mut rng, batches.len())];
            let mut b = h.app.world_mut().get_mut::<GpuCulledInstances>(entity).unwrap();
            let len = b.len();
            match pick(&mut rng, 6) {
                0 if len > 0 => b.set(pick(&mut rng, len), instance(&mut rng, scale)),
                1 if len > 0 => {
                    let start = pick(&mut rng, len);
                    let end = (start + 1 + pick(&mut rng, 50)).min(len);
                    for i in b.edit(start..end) {
                        i.position.y += 0.5;
                    }
                }
                2 => b.extend((0..pick(&mut rng, 1200)).map(|_| instance(&mut rng, scale))),
                3 => b.truncate(pick(&mut rng, len + 1)),
                4 => b.replace(
                    (0..pick(&mut rng, 800))
                        .map(|_| instance(&mut rng, scale))
                        .collect(),
                ),
                _ => b.push(instance(&mut rng, scale)),
            }
        }
        if frame % 13 == 0 && cameras.len() < 3 {
            let world = h.app.world_mut();
            let mut image = Image::new_target_texture(32, 32, TextureFormat::Rgba8UnormSrgb, None);
            image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
            let handle = world.resource_mut::<Assets<Image>>().add(image);
            let eye = Vec3::new(
                rng.range(-30.0, 30.0),
                rng.range(2.0, 10.0),
                rng.range(-20.0, 10.0),
            );
            let camera = world
                .spawn((
                    Camera3d::default(),
                    Camera {
                        order: 10 + frame as isize,
                        ..default()
                    },
                    RenderTarget::Image(ImageRenderTarget {
                        handle,
                        scale_factor: 1.0,
                    }),
                    Msaa::Off,
                    Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.0, -30.0), Vec3::Y),
                ))
                .id();
            cameras.push(camera);
        }
        if frame % 17 == 8 && cameras.len() > 1 {
            let camera = cameras.remove(1 + pick(&mut rng, cameras.len() - 1));
            h.app.world_mut().despawn(camera);
        }
        if frame % 19 == 0 {
            let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
            settings.variant = variants[(frame / 19) % variants.len()];
            switches += 1;
        }
        if frame % 29 == 0 {
            let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
            settings.format = InstanceFormat::ALL[(frame / 29) % InstanceFormat::ALL.len()];
        }
        h.app.update();
        if frame % 300 == 299 {
            let ids: Vec<Entity> = batches.iter().map(|b| b.0).collect();
            settle_counts(&mut h, &cameras, &ids, &format!("checkpoint at frame {frame}"));
            checkpoints += 1;
        }
        let errors = RENDER_ERRORS.lock().unwrap().clone();
        assert!(errors.is_empty(), "frame {frame}: wgpu errors: {errors:?}");
    }
    // The churn stops: back to the starting scene and settings, in new
    // entities (a batch's buffers keep the capacity it grew to, so the
    // original batch is replaced rather than restored).
    for &(entity, _) in &batches {
        h.app.world_mut().despawn(entity);
    }
    for &camera in &cameras[1..] {
        h.app.world_mut().despawn(camera);
    }
    *h.app.world_mut().resource_mut::<GpuCullSettings>() = GpuCullSettings::default();
    let batch = h
        .app
        .world_mut()
        .spawn((
            Mesh3d(mesh),
            GpuCulledInstances::new(original.instances().to_vec()),
        ))
        .id();
    settle_counts(&mut h, &[main_camera], &[batch], "after the churn");
    let mut bytes = 0;
    for _ in 0..10 {
        h.app.update();
        bytes = h.app.world().resource::<GpuCullStats>().gpu_buffer_bytes;
        if bytes == baseline {
            break;
        }
    }
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "wgpu errors: {errors:?}");
    assert_eq!(bytes, baseline, "GPU buffer bytes after the churn vs before");
    eprintln!(
        "soak: {frames} frames, {checkpoints} checkpoints, {switches} variant switches, buffers {baseline} B before and after, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(checkpoints >= frames / 300);
}

/// The camera's visible count for the batch once it has held for a few
/// frames (and the plugin has culled a few), or `None` within the settle
/// time.
fn settled_count(h: &mut Harness) -> Option<u32> {
    let start = std::time::Instant::now();
    let mut last = (u32::MAX, 0);
    while start.elapsed() < SETTLE {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        let count = stats
            .visible
            .get(&(h.cameras[0], h.batch))
            .copied()
            .unwrap_or(u32::MAX);
        last = if count == last.0 {
            (count, last.1 + 1)
        } else {
            (count, 0)
        };
        let idle = h
            .app
            .world()
            .resource::<PipelinesIdle>()
            .0
            .load(Ordering::Relaxed);
        // (Idle for longer than the counts take to come back.)
        if count != u32::MAX && last.1 >= 5 && stats.culled_frames > 5 && idle >= 10 {
            return Some(count);
        }
    }
    None
}

/// The next frame rendered from now on: a new readback of the camera's
/// target, which sees only frames rendered after it exists.
fn next_frame(h: &mut Harness) -> Vec<u8> {
    let world = h.app.world_mut();
    let old: Vec<Entity> = world
        .query_filtered::<Entity, With<Readback>>()
        .iter(world)
        .collect();
    let handle = match world.get::<RenderTarget>(h.cameras[0]) {
        Some(RenderTarget::Image(target)) => target.handle.clone(),
        _ => panic!("the camera renders to an image"),
    };
    for e in old {
        world.despawn(e);
    }
    // Its own observer: a readback of the old entity still in flight would
    // deliver an older frame.
    let pixels = Arc::new(Mutex::new(None));
    let sink = pixels.clone();
    world
        .spawn(Readback::texture(handle))
        .observe(move |event: On<ReadbackComplete>| {
            sink.lock().unwrap().get_or_insert_with(|| event.data.clone());
        });
    for _ in 0..100 {
        h.app.update();
        if let Some(p) = pixels.lock().unwrap().clone() {
            return p;
        }
    }
    panic!("no frame read back");
}

/// Issue 17: with `GpuCullOcclusion` (and Bevy's depth prepass and
/// occlusion culling) on the camera, a wall in front of half the grid hides
/// the instances behind it: the camera's count (early + late phases) falls
/// well below the frustum's; along a sweep of the camera every frame equals
/// the frame rendered with occlusion culling off; and when the wall moves
/// away the very next frame shows what it hid. Rendered without pipelining,
/// so that the test can copy the prepass depth (`install_depth_probe`): the
/// count equals the CPU mirror's against a pyramid built from it. (The
/// other occlusion tests render pipelined.)
#[test]
fn occlusion_culling_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::PlainSynchronous);
}

/// Issue 17 with Bevy's default MSAA (4 samples, here on an HDR camera):
/// the pyramid takes each pixel's farthest sample, and the wall hides as
/// without MSAA, with nothing visible missing.
#[test]
fn occlusion_culling_with_msaa_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::HdrMsaa4);
}

/// Issue 17 with temporal anti-aliasing's jitter on the camera: the late
/// phase widens each sphere's screen rectangle by the jitter, and the wall
/// hides as without it, with nothing visible missing.
#[test]
fn occlusion_culling_with_temporal_jitter_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::Jittered);
}

/// Occlusion culling on every camera of `h` (with the Bevy components it
/// needs), and a gray wall between the first camera and the left half of
/// the grid; returns the wall.
fn occlusion_with_a_wall(h: &mut Harness) -> Entity {
    let world = h.app.world_mut();
    for &camera in &h.cameras {
        world.entity_mut(camera).insert((
            bevy::core_pipeline::prepass::DepthPrepass,
            bevy::render::occlusion_culling::OcclusionCulling,
            GpuCullOcclusion,
        ));
    }
    let wall_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(30.0, 12.0, 0.5));
    let gray = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from_color(Color::srgb(0.5, 0.5, 0.5)));
    world
        .spawn((
            Mesh3d(wall_mesh),
            MeshMaterial3d(gray),
            Transform::from_xyz(-15.0, 1.0, 2.0),
        ))
        .id()
}

/// The occlusion culling reference of the first camera against a pyramid
/// built on the CPU from `depth` (its prepass depth, reverse-Z): how many
/// instances it must keep (in the frustum and past the pyramid however the
/// GPU rounds) and how many it may keep or cull (borderline in either).
fn occlusion_reference(h: &mut Harness, depth: &[f32]) -> (u32, u32) {
    use cull_core::frustum::SphereClass;
    let world = h.app.world_mut();
    let camera = h.cameras[0];
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let (clip_from_view, world_from_view) = (cam.clip_from_view(), transform.to_matrix());
    // As the plugin's cull and late phase: in the batch's frame, the
    // unjittered projection about the camera's position.
    let batch_transform = world.get::<GlobalTransform>(h.batch).unwrap().to_matrix();
    let frame = cull_core::LocalFrame::new(batch_transform).unwrap();
    let frustum = frame
        .frustum_from_view(clip_from_view, world_from_view, None)
        .unwrap();
    let occlusion = frame
        .occlusion_from_view(clip_from_view, world_from_view)
        .unwrap();
    let pyramid =
        cull_core::CpuPyramid::build(WIDTH, HEIGHT, depth, cull_core::DepthOrder::ReverseZ).unwrap();
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let spheres = world
        .get::<GpuCulledInstances>(h.batch)
        .unwrap()
        .world_spheres(bounds, format)
        .unwrap();
    let (mut must, mut may) = (0, 0);
    for sphere in spheres.iter().flatten() {
        match (
            frustum.classify(sphere),
            occlusion.classify(sphere, &pyramid).unwrap(),
        ) {
            (SphereClass::Outside, _) | (_, SphereClass::Outside) => {}
            (SphereClass::Inside, SphereClass::Inside) => must += 1,
            _ => may += 1,
        }
    }
    (must, may)
}

fn occlusion_behind_a_wall(setup: CameraSetup) {
    occlusion_behind_a_wall_in(setup, None);
}

/// The instances of `batch` given relative to `frame` (a turn, a uniform
/// scale and a translation), which becomes the batch entity's transform:
/// the scene stays where it was in the world.
fn reframe(world: &mut World, batch: Entity, frame: Transform) {
    let (turn, scale) = (frame.rotation.inverse(), frame.scale.x);
    let instances: Vec<CulledInstance> = world
        .get::<GpuCulledInstances>(batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| CulledInstance {
            position: turn * (i.position - frame.translation) / scale,
            rotation: turn * i.rotation,
            scale: i.scale / scale,
            ..*i
        })
        .collect();
    world
        .get_mut::<GpuCulledInstances>(batch)
        .unwrap()
        .replace(instances);
    world.entity_mut(batch).insert(frame);
}

/// Occlusion culling of a batch under a turned, scaled transform far from
/// the origin of its instances' coordinates: the same wall hides the same
/// share, the count is the CPU reference's in the batch's frame, and
/// nothing visible is missing along the sweep.
#[test]
fn occlusion_culling_hides_what_a_wall_covers_in_the_batch_frame() {
    let frame = Transform::from_xyz(40.0, -3.0, -25.0)
        .with_rotation(Quat::from_rotation_y(0.7))
        .with_scale(Vec3::splat(1.5));
    occlusion_behind_a_wall_in(CameraSetup::PlainSynchronous, Some(frame));
}

fn occlusion_behind_a_wall_in(setup: CameraSetup, frame: Option<Transform>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], setup);
    record_render_errors(&mut h.app);
    if let Some(frame) = frame {
        reframe(h.app.world_mut(), h.batch, frame);
    }
    let camera = h.cameras[0];
    let wall = occlusion_with_a_wall(&mut h);
    // Single-sampled depth is copied where the prepass left it, for the
    // CPU reference (a multisampled one cannot be copied to a buffer).
    let probe = (setup == CameraSetup::PlainSynchronous).then(|| install_depth_probe(&mut h));
    let occluded = settled_count(&mut h).expect("the count settles");
    let in_frustum = expected_visible(&mut h.app, camera, h.batch);
    if let Some(probe) = &probe {
        // Settled, the early phase draws what passed last frame and the
        // late phase adds nothing: the prepass depth is the one the
        // pyramid was built from, and the count is the CPU's reference.
        let depth = prepass_depth(&h, probe);
        assert_eq!(settled_count(&mut h), Some(occluded), "the count moved");
        let (must, may) = occlusion_reference(&mut h, &depth);
        assert!(
            (must..=must + may).contains(&occluded),
            "occlusion culling kept {occluded}; the CPU reference keeps {must} and {may} borderline ({in_frustum} in the frustum)"
        );
        assert!(
            must < in_frustum,
            "the CPU reference hides nothing: {must} of {in_frustum}"
        );
    }
    // At most three quarters kept; a jittered camera's rectangles, widened
    // by its offset, read coarser pyramid levels and hide fewer.
    let (kept, of) = if setup == CameraSetup::Jittered {
        (19, 20)
    } else {
        (3, 4)
    };
    assert!(
        occluded > 0 && occluded < in_frustum * kept / of,
        "the wall hides {} of {in_frustum} instances in the frustum",
        in_frustum - occluded.min(in_frustum)
    );
    assert!(in_frustum > 0);
    // Along a sweep of the camera, each frame equals the frame rendered
    // with occlusion culling off: nothing visible is missing.
    let start = looking_down_grid();
    for (step, yaw) in [0.0f32, 0.3, -0.4, 0.6].into_iter().enumerate() {
        let mut transform = start;
        transform.rotate_around(Vec3::new(0.0, 0.0, -10.0), Quat::from_rotation_y(yaw));
        h.app
            .world_mut()
            .entity_mut(camera)
            .insert((transform, GpuCullOcclusion));
        let occluded_here = settled_count(&mut h).expect("the count settles");
        let with_occlusion = next_frame(&mut h);
        h.app.world_mut().entity_mut(camera).remove::<GpuCullOcclusion>();
        let in_view = expected_visible(&mut h.app, camera, h.batch);
        assert_eq!(
            settled_count(&mut h),
            Some(in_view),
            "step {step}: without occlusion culling"
        );
        assert!(
            occluded_here <= in_view,
            "step {step}: {occluded_here} > {in_view}"
        );
        let without = next_frame(&mut h);
        let changed = changed_pixels(&with_occlusion, &without);
        assert!(
            changed <= (WIDTH * HEIGHT / 500) as usize,
            "step {step}: {changed} pixels differ with occlusion culling on and off"
        );
    }
    h.app.world_mut().entity_mut(camera).insert(start);
    // The wall moves away: the first frame after shows the whole grid.
    h.app.world_mut().entity_mut(camera).insert(GpuCullOcclusion);
    assert_eq!(
        settled_count(&mut h),
        Some(occluded),
        "occlusion culling on again"
    );
    h.app
        .world_mut()
        .entity_mut(wall)
        .insert(Transform::from_xyz(-1000.0, 1.0, 2.0));
    let first = next_frame(&mut h);
    h.app.world_mut().entity_mut(camera).remove::<GpuCullOcclusion>();
    settled_count(&mut h);
    let reference = next_frame(&mut h);
    let changed = changed_pixels(&first, &reference);
    let png = std::env::temp_dir().join("bevy-gpu-cull-occlusion-first-frame.png");
    let _ = image::save_buffer(
        &png,
        &frame_pixels(&first).flatten().copied().collect::<Vec<u8>>(),
        WIDTH,
        HEIGHT,
        image::ColorType::Rgba8,
    );
    assert!(
        changed <= (WIDTH * HEIGHT / 500) as usize,
        "the first frame after the wall moved differs from the unoccluded frame in {changed} pixels (see {})",
        png.display()
    );
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// Issues 17 and 19: a batch sorted into cells on an occlusion-culled
/// camera is culled by cells in both phases (reported by cells), keeps the
/// count it had culled flat (fewer than the frustum's: the wall), and
/// renders without errors.
#[test]
fn occlusion_culling_by_cells() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::Plain);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    occlusion_with_a_wall(&mut h);
    let flat = settled_count(&mut h).expect("the count settles");
    h.app
        .world_mut()
        .entity_mut(h.batch)
        .insert(GpuCullCells { min_skipped_bytes: 0 });
    let start = std::time::Instant::now();
    let cells = loop {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        if let Some(cells) = stats.cells.get(&(camera, h.batch)).filter(|c| c.by_cells) {
            break *cells;
        }
        assert!(
            start.elapsed() < SETTLE,
            "never culled by cells: {:?}",
            stats.cells
        );
    };
    assert!(cells.kept > 0 && cells.kept <= cells.cells, "{cells:?}");
    let by_cells = settled_count(&mut h).expect("the count settles by cells");
    assert_eq!(by_cells, flat, "occlusion culled by cells and flat");
    let in_frustum = expected_visible(&mut h.app, camera, h.batch);
    assert!(
        by_cells < in_frustum,
        "{by_cells} of {in_frustum}: the wall hides nothing"
    );
    let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// Issue 17: two occlusion-culled cameras keep their own pyramids and
/// histories: a wall in front of the first hides part of its view, while
/// the second, looking at the grid from the other side with the wall behind
/// it, keeps everything in its frustum.
#[test]
fn two_occlusion_culled_cameras_cull_independently() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let behind = Transform::from_xyz(0.0, 6.0, -90.0).looking_at(Vec3::new(0.0, 0.0, -60.0), Vec3::Y);
    let mut h = harness_with(None, &[looking_down_grid(), behind], CameraSetup::Plain);
    record_render_errors(&mut h.app);
    occlusion_with_a_wall(&mut h);
    let start = std::time::Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < SETTLE {
        h.app.update();
        let expected = expected_counts(&mut h);
        let stats = h.app.world().resource::<GpuCullStats>();
        last = h
            .cameras
            .iter()
            .map(|&c| stats.visible.get(&(c, h.batch)).copied().unwrap_or(u32::MAX))
            .collect();
        // The first camera sees less than its frustum, the second all of it.
        if stats.culled_frames > 5
            && last[0] > 0
            && last[0] < expected[0] * 3 / 4
            && expected[1] > 0
            && last[1] == expected[1]
        {
            let errors = RENDER_ERRORS.lock().unwrap_or_else(|e| e.into_inner()).clone();
            assert!(errors.is_empty(), "render errors: {errors:#?}");
            return;
        }
    }
    panic!("counts {last:?}, frusta {:?}", expected_counts(&mut h));
}

/// Issue 19: a batch with `GpuCullCells` is sorted into cells in the render
/// world and culled by cells: each camera's count equals the CPU reference
/// (the flat cull's), most cells are not read, the instances render, and an
/// instance moved from a culled cell into view is drawn (its cell's sphere
/// follows it), as is a resized list (sorted again).
#[test]
fn cells_cull_what_the_flat_cull_culls() {
    cells_case(None);
}

/// The same with `Ordered`, whose cull by cells walks every tile in order.
#[test]
fn cells_cull_what_the_flat_cull_culls_ordered() {
    if !ScanVariant::Ordered.is_compiled() {
        eprintln!("Ordered is not compiled in: nothing to check");
        return;
    }
    cells_case(Some(ScanVariant::Ordered));
}

fn cells_case(variant: Option<ScanVariant>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness_with(variant, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    // A field of 200 × 200 spheres, 2 apart, around the camera: half of it
    // behind the camera, much of the rest beside its view.
    let field: Vec<CulledInstance> = (0..40_000)
        .map(|i| {
            let (x, z) = ((i % 200) as f32, (i / 200) as f32);
            CulledInstance::new(
                Vec3::new(x * 2.0 - 200.0, 0.0, 200.0 - z * 2.0),
                LinearRgba::rgb(1.0, 0.2, 0.1),
            )
        })
        .collect();
    h.app.world_mut().entity_mut(h.batch).insert((
        GpuCulledInstances::new(field),
        GpuCullCells { min_skipped_bytes: 0 },
    ));
    let camera = h.cameras[0];
    let cells_of = |h: &Harness| {
        h.app
            .world()
            .resource::<GpuCullStats>()
            .cells
            .get(&(camera, h.batch))
            .copied()
    };
    run_until_counts_match(&mut h, "by cells");
    let start = std::time::Instant::now();
    while cells_of(&h).is_none_or(|c| !c.by_cells) && start.elapsed() < SETTLE {
        h.app.update();
    }
    let cells = cells_of(&h).expect("cell statistics for the camera");
    assert!(cells.by_cells, "{cells:?}");
    assert!(
        cells.kept > 0 && cells.kept * 2 < cells.cells,
        "the camera should keep less than half of the field's cells: {cells:?}"
    );
    run_until_counts_match(&mut h, "by cells, after the cell kernels compiled");
    assert_renders(&mut h, "by cells");
    // An instance from behind the camera, moved in front of it.
    let before = expected_counts(&mut h)[0];
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .set(
            0,
            CulledInstance::new(Vec3::new(0.0, 0.0, -4.0), LinearRgba::rgb(1.0, 0.2, 0.1)),
        );
    assert_eq!(
        expected_counts(&mut h)[0],
        before + 1,
        "the moved instance is in view"
    );
    run_until_counts_match(&mut h, "an instance moved into view");
    // Many edits at once, scattered over the cells: a thousand instances
    // moved into view (their cells grow, and are tightened later).
    {
        let mut list = h.app.world_mut().get_mut::<GpuCulledInstances>(h.batch).unwrap();
        for i in (1000..4000).step_by(3) {
            let (x, z) = ((i % 40) as f32, (i / 40) as f32);
            list.set(
                i,
                CulledInstance::new(
                    Vec3::new(x - 20.0, 0.0, -10.0 - z),
                    LinearRgba::rgb(1.0, 0.2, 0.1),
                ),
            );
        }
    }
    run_until_counts_match(&mut h, "a thousand instances moved");
    // A longer list: sorted again.
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .push(CulledInstance::new(
            Vec3::new(1.0, 0.0, -5.0),
            LinearRgba::rgb(1.0, 0.2, 0.1),
        ));
    run_until_counts_match(&mut h, "a pushed instance");
    let errors = RENDER_ERRORS.lock().unwrap().clone();
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Runs frames until `done` holds for the stats, or fails with `what`.
fn run_until_stats(h: &mut Harness, what: &str, done: impl Fn(&GpuCullStats) -> bool) {
    let start = std::time::Instant::now();
    while start.elapsed() < SETTLE {
        h.app.update();
        if done(h.app.world().resource::<GpuCullStats>()) {
            return;
        }
    }
    panic!("{what}: {:?}", h.app.world().resource::<GpuCullStats>().visible);
}

/// The latest value of the plugin's visible-instances diagnostic.
fn visible_diagnostic(h: &Harness) -> Option<f64> {
    let store = h.app.world().resource::<bevy::diagnostic::DiagnosticsStore>();
    store.get(&GpuCullPlugin::VISIBLE).and_then(|d| d.value())
}

/// The stats tell the truth: a hidden batch is neither culled nor drawn and
/// has no counts (0 through the accessors); shown again it is culled and
/// counted as before; a despawned batch leaves nothing in the stats nor in
/// the visible-instances diagnostic.
#[test]
fn stats_hold_only_live_visible_batches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = harness(None, &[looking_down_grid()]);
    let (camera, batch) = (h.cameras[0], h.batch);
    let counts = run_until_counts_match(&mut h, "before hiding");
    assert!(counts[0] > 0);
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.visible_for(camera, batch), counts[0]);
    assert_eq!(stats.visible_in(batch), counts[0]);

    h.app.world_mut().entity_mut(batch).insert(Visibility::Hidden);
    run_until_stats(&mut h, "hidden batch still counted", |s| {
        s.visible.is_empty() && s.shadow_visible.is_empty()
    });
    // Nothing else is culled: no render frame culls any more.
    let culled = h.app.world().resource::<GpuCullStats>().culled_frames;
    for _ in 0..8 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.culled_frames, culled, "a hidden batch is still culled");
    assert!(
        stats.visible.is_empty() && stats.timings.is_empty(),
        "{:?}",
        stats.visible
    );
    assert_eq!(
        (stats.visible_for(camera, batch), stats.visible_in(batch)),
        (0, 0)
    );
    assert_eq!(visible_diagnostic(&h), Some(0.0));
    let padded = h.pixels.lock().unwrap().clone().expect("a frame was read back");
    let shown = count_pixels(&padded, 0..HEIGHT as usize, |p| p[0] as u32 > p[2] as u32 + 30);
    assert_eq!(shown, 0, "a hidden batch is drawn");

    h.app.world_mut().entity_mut(batch).insert(Visibility::Inherited);
    assert_eq!(run_until_counts_match(&mut h, "shown again"), counts);

    h.app.world_mut().entity_mut(batch).despawn();
    run_until_stats(&mut h, "despawned batch still counted", |s| {
        s.visible.is_empty() && s.shadow_visible.is_empty()
    });
    for _ in 0..8 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    let of_batch = |b: &Entity| *b == batch;
    assert!(
        !stats.visible.keys().any(|(_, b)| of_batch(b))
            && !stats.visible_per_level.keys().any(|(_, b)| of_batch(b))
            && !stats.timings.keys().any(|(_, b)| of_batch(b))
            && !stats.shadow_visible.keys().any(|(_, b)| of_batch(b)),
        "a despawned batch is still in the stats"
    );
    assert_eq!(visible_diagnostic(&h), Some(0.0));
}
