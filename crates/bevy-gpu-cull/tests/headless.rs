//! The plugin in a headless app on the adapter Bevy finds (lavapipe on
//! machines without a GPU): visible counts equal the CPU reference per
//! camera, pixels are covered where instances are and background elsewhere,
//! counts follow edits, and empty batches draw nothing.

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::image::Image;
use bevy::prelude::*;
use bevy::render::gpu_readback::{Readback, ReadbackComplete};
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy::window::ExitCondition;
use bevy_gpu_cull::prelude::*;
use cull_core::InstanceFormat;
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

/// A grid of spheres in the XZ plane, and cameras looking at parts of it.
fn harness(variant: Option<ScanVariant>, camera_transforms: &[Transform]) -> Harness {
    let mut app = App::new();
    app.add_plugins((
        DefaultPlugins
            .set(WindowPlugin {
                primary_window: None,
                exit_condition: ExitCondition::DontExit,
                ..default()
            })
            .disable::<bevy::log::LogPlugin>()
            .disable::<bevy::winit::WinitPlugin>(),
        ScheduleRunnerPlugin::run_loop(std::time::Duration::ZERO),
        GpuCullPlugin {
            settings: GpuCullSettings {
                variant,
                format: InstanceFormat::PosQuat,
            },
        },
    ));
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
                Msaa::Off,
                *transform,
            ))
            .id();
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

/// The CPU reference for a camera: instances whose bounding sphere touches its frustum.
fn expected_visible(app: &mut App, camera: Entity, batch: Entity) -> u32 {
    let world = app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let clip_from_world = cam.clip_from_view() * transform.to_matrix().inverse();
    let bounds = *world
        .get::<GpuCullBounds>(batch)
        .expect("the plugin computed the batch's bounds");
    let batch = world.get::<GpuCulledInstances>(batch).unwrap();
    batch.visible_on_cpu(bounds, clip_from_world).unwrap().len() as u32
}

/// Runs frames until every camera reports a count for the batch that equals
/// the reference (counts arrive a frame or two late), or fails.
fn run_until_counts_match(h: &mut Harness, what: &str) -> Vec<u32> {
    let mut last = Vec::new();
    for _ in 0..120 {
        h.app.update();
        let expected: Vec<u32> = h
            .cameras
            .clone()
            .iter()
            .map(|&c| expected_visible(&mut h.app, c, h.batch))
            .collect();
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
    let expected: Vec<u32> = h
        .cameras
        .clone()
        .iter()
        .map(|&c| expected_visible(&mut h.app, c, h.batch))
        .collect();
    panic!("{what}: GPU counts {last:?}, CPU reference {expected:?}");
}

fn looking_down_grid() -> Transform {
    Transform::from_xyz(0.0, 6.0, 8.0).looking_at(Vec3::new(0.0, 0.0, -10.0), Vec3::Y)
}

/// Renders until the frame shows the clear color (pipelines compile
/// asynchronously), then checks the instances cover the lower part of the
/// view and the sky stays background. Saves the frame to the temp folder.
fn assert_renders(h: &mut Harness, what: &str) {
    // Pipelines compile asynchronously: render until the frame shows the
    // clear color, then judge it.
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let is_background = |p: &[u8]| p[0] < 10 && p[1] < 10 && p[2] > 200;
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
        if is_background(&sky) && covered > w * hgt / 10 {
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
        .instances
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
        .instances = more;
    run_until_counts_match(&mut h, "after growing");
    // Empty: nothing visible, no error.
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .instances
        .clear();
    let empty = run_until_counts_match(&mut h, "empty batch");
    assert_eq!(empty, vec![0, 0]);
    // Switching the variant at run time takes effect.
    let target = ScanVariant::compiled().last().unwrap();
    h.app.world_mut().resource_mut::<GpuCullSettings>().variant = Some(target);
    h.app
        .world_mut()
        .get_mut::<GpuCulledInstances>(h.batch)
        .unwrap()
        .instances = (0..300)
        .map(|i| CulledInstance::new(Vec3::new(i as f32 * 0.3 - 45.0, 0.0, -5.0), LinearRgba::WHITE))
        .collect();
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
    assert!(
        out.status.success(),
        "the GL child failed (needs libegl-mesa0 and libgl1-mesa-dri):\n{text}"
    );
    assert!(text.contains("1 passed"), "the GL child ran no test:\n{text}");
}

#[test]
#[ignore = "run by gl_backend_renders with WGPU_BACKEND=gl"]
fn gl_backend_child() {
    assert_eq!(std::env::var("WGPU_BACKEND").as_deref(), Ok("gl"));
    let mut h = harness(None, &[looking_down_grid()]);
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
}
