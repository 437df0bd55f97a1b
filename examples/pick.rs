//! Clicking instances: a field of spheres culled on the GPU, each one
//! recoloured when clicked. `GpuCullPickingPlugin` is a `bevy_picking`
//! backend: `Pointer<Click>` fires on the batch entity and its hit carries
//! the instance (`GpuCullHit`), found exactly (the ray against the
//! sphere's triangles, the nearest along it) among a million instances in
//! well under a millisecond. Hovering shows the instance under the cursor.
//!
//! ```text
//! cargo run --release --example pick
//! cargo run --release --example pick -- --count 1e6
//! cargo run --release --example pick -- --headless --frames 10 --screenshot pick.png
//! ```
//!
//! Headless, the example clicks the middle of the image itself and prints
//! the instance it picked.

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::camera::RenderTarget;
use bevy::picking::pointer::{Location, PointerAction, PointerButton, PointerId, PointerInput};
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use bevy_gpu_cull::{GpuCullHit, GpuCullPickingPlugin, GpuCullRayCast, GpuCullRayView};

type Args = support::SceneArgs;

/// The instance the last click recoloured, and what a ray cast cost: the
/// first after the list changed (which builds the batch's hierarchy) and
/// the next (for the headless summary).
#[derive(Resource, Default)]
struct Picked(Option<u32>, Option<(f64, f64)>);

/// Click an instance to recolour it (headless: the example clicks one itself and times a ray).
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// instances (default 40000; 1e6 works)
    #[argh(option, default = "40_000", from_str_fn(support::parse_count))]
    count: usize,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless (default 10)
    #[argh(option, default = "10")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

fn main() {
    let flags: Flags = argh::from_env();
    let mut app = support::example_app("pick", &support::scene_args!(flags));
    app.add_plugins((GpuCullPlugin::default(), GpuCullPickingPlugin))
        .init_resource::<Picked>()
        .add_systems(Startup, setup)
        .add_systems(Update, (time_ray_casts, finish_headless).chain())
        .run();
}

fn setup(
    mut commands: Commands,
    args: Res<Args>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut images: ResMut<Assets<Image>>,
) {
    let side = (args.count as f32).sqrt().ceil() as usize;
    let spheres: Vec<GpuCullInstance> = (0..args.count)
        .map(|i| {
            let (x, z) = ((i % side) as f32, (i / side) as f32);
            let position = Vec3::new(x - side as f32 * 0.5, 0.0, -z) * 1.5;
            GpuCullInstance::new(position, LinearRgba::gray(0.6))
        })
        .collect();
    commands
        .spawn((
            Mesh3d(meshes.add(Sphere::new(0.5).mesh().ico(2).expect("a small icosphere"))),
            GpuCullInstances::new(spheres),
        ))
        .observe(recolour)
        .observe(hover);
    commands.spawn((
        DirectionalLight::default(),
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn((
        Camera3d::default(),
        Transform::from_xyz(0.0, 8.0, 10.0).looking_at(Vec3::new(0.0, 0.0, -15.0), Vec3::Y),
    ));
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
        // Bevy's picking tests pointers against cameras only where there
        // is a primary window: headless, one that nothing opens.
        commands.spawn((Window::default(), bevy::window::PrimaryWindow));
    }
}

/// A click paints the instance under the pointer orange.
fn recolour(
    click: On<Pointer<Click>>,
    mut batches: Query<&mut GpuCullInstances>,
    mut picked: ResMut<Picked>,
) {
    let Some(hit) = click.hit.extra_as::<GpuCullHit>() else {
        return;
    };
    if let Ok(mut batch) = batches.get_mut(click.entity) {
        let instance = batch.instances()[hit.instance as usize].with_color(LinearRgba::rgb(1.0, 0.35, 0.0));
        batch.set(hit.instance as usize, instance);
        picked.0 = Some(hit.instance);
    }
}

/// Hovering lights the instance under the pointer a little.
fn hover(over: On<Pointer<Over>>, mut batches: Query<&mut GpuCullInstances>) {
    let Some(hit) = over.hit.extra_as::<GpuCullHit>() else {
        return;
    };
    if let Ok(mut batch) = batches.get_mut(over.entity) {
        let instance = batch.instances()[hit.instance as usize];
        if instance.linear_color() == LinearRgba::gray(0.6) {
            batch.set(hit.instance as usize, instance.with_color(LinearRgba::gray(0.9)));
        }
    }
}

/// Headless, once: times a ray cast through the middle of the image after
/// the list changed (building the batch's hierarchy again) and another.
fn time_ray_casts(
    args: Res<Args>,
    run: Res<support::HeadlessRun>,
    mut picked: ResMut<Picked>,
    cameras: Query<(&Camera, &GlobalTransform)>,
    mut batches_and_cast: ParamSet<(Query<&mut GpuCullInstances>, GpuCullRayCast)>,
) {
    if !args.headless || picked.1.is_some() || run.frames_ready() < 8 {
        return;
    }
    let Ok((camera, transform)) = cameras.single() else {
        return;
    };
    let middle = Vec2::new(args.width as f32, args.height as f32) * 0.5;
    let Ok(ray) = camera.viewport_to_world(transform, middle) else {
        return;
    };
    for mut batch in &mut batches_and_cast.p0() {
        batch.set_changed();
    }
    // A ray from the camera: it picks what the camera draws.
    let view = GpuCullRayView::of(camera, transform);
    let mut cast = batches_and_cast.p1();
    let start = std::time::Instant::now();
    cast.cast_view_ray(ray, view, |_| true);
    let first = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    cast.cast_view_ray(ray, view, |_| true);
    picked.1 = Some((first * 1e3, start.elapsed().as_secs_f64() * 1e6));
}

/// Headless: once the field is drawn, clicks the middle of the image,
/// takes the screenshot, prints what was picked, and exits.
fn finish_headless(
    args: Res<Args>,
    mut run: ResMut<support::HeadlessRun>,
    settled: Res<support::PipelinesSettled>,
    stats: Res<GpuCullStats>,
    picked: Res<Picked>,
    targets: Query<&RenderTarget, With<Camera3d>>,
    mut inputs: MessageWriter<PointerInput>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
) {
    if !args.headless {
        return;
    }
    let ready = stats.drawn_frames >= 2;
    if ready && run.frames_ready() < 6 {
        // Move to the middle, then press and release there.
        if let Some(target) = targets.single().ok().and_then(|t| t.normalize(None)) {
            let location = Location {
                target,
                position: Vec2::new(args.width as f32, args.height as f32) * 0.5,
            };
            let action = match run.frames_ready() {
                0..=2 => PointerAction::Move { delta: Vec2::ZERO },
                3 => PointerAction::Press(PointerButton::Primary),
                _ => PointerAction::Release(PointerButton::Primary),
            };
            inputs.write(PointerInput::new(PointerId::Mouse, location, action));
        }
    }
    let support::HeadlessStep::Finish(exit_code) = run.step(
        &args,
        ready,
        picked.1.is_some(),
        &settled,
        targets.single().ok(),
        &mut commands,
    ) else {
        return;
    };
    let (build_ms, cast_us) = picked.1.unzip();
    run.summary("pick", &settled)
        .line(match picked.0 {
            Some(i) => format!("clicked instance {i} of {}", args.count),
            None => "the click hit no instance".into(),
        })
        .line(format!(
            "a ray cast: {:.2} ms after the list changed, {:.1} us after that",
            build_ms.unwrap_or(f64::NAN),
            cast_us.unwrap_or(f64::NAN)
        ))
        .field("instances", args.count)
        .field("visible", stats.visible.values().sum::<u32>())
        .field("picked", picked.0)
        .field("index_build_ms", build_ms)
        .field("ray_cast_us", cast_us)
        .print(args.json);
    exit.write(exit_code);
}
