//! Occlusion culling (`cull_core::occlusion`): the depth pyramid against
//! its CPU mirror, and two frames of early and late phases in every variant
//! (both forms of the ordered one), format and output kind (each form with
//! one format and output kind, turning so that every format meets both
//! output kinds; every combination with `GPU_CULL_FULL_MATRIX=1`), one view
//! and four levels of detail, each
//! list checked against the CPU reference as an exact set: the early phase
//! keeps exactly what the history says and the frustum keeps, the late
//! phase exactly what passes the pyramid and was not drawn early, and the
//! history records what passed.

use crate::harness::*;
use cull_core::SphereClass;
use cull_core::cpu::Reference;
use cull_core::scene::{CameraKind, Scene, SceneRng};
use cull_core::{
    CellIndex, CpuPyramid, CullError, CullInput, CullRequest, CullTarget, Culler, DepthOrder, DepthPyramid,
    Frustum, GpuContext, InstanceFormat, OcclusionCamera, OcclusionHistory, OutputKind, PyramidBuilder,
};
use glam::Vec3;

const SIZES: [usize; 5] = [0, 1, 257, 4099, 100_003];
/// The depth buffer: odd sizes, so that pyramid levels round up.
const WIDTH: u32 = 61;
const HEIGHT: u32 = 37;

/// `request`, by `cells` where there are cells.
fn maybe_by_cells<'a>(request: CullRequest<'a>, cells: Option<&'a CellIndex>) -> CullRequest<'a> {
    match cells {
        Some(cells) => request.by_cells(cells),
        None => request,
    }
}

fn depth_order(camera: CameraKind) -> DepthOrder {
    match camera {
        CameraKind::Perspective => DepthOrder::Standard,
        CameraKind::InfiniteReverseZ | CameraKind::Orthographic => DepthOrder::ReverseZ,
    }
}

/// The scene's camera, positions taken about its eye, its projection
/// jittered by up to `jitter` pixels (temporal anti-aliasing's).
fn occlusion_camera(scene: &Scene, jitter: f32) -> OcclusionCamera {
    let eye = scene
        .clip_from_world
        .inverse()
        .project_point3(Vec3::new(0.0, 0.0, 0.5));
    OcclusionCamera::from_clip_from_world(scene.clip_from_world, eye)
        .unwrap()
        .with_jitter(jitter)
        .unwrap()
}

/// A depth buffer of random rectangles (occluders) at depths drawn from the
/// visible instances' own depths, over the far depth: some instances are
/// hidden, some not, some half.
fn occluders(scene: &Scene, order: DepthOrder, seed: u64) -> Vec<f32> {
    let far = match order {
        DepthOrder::ReverseZ => 0.0,
        DepthOrder::Standard => 1.0,
    };
    let mut depths: Vec<f32> = scene
        .instances
        .iter()
        .filter(|i| i.position.is_finite())
        .map(|i| {
            let c = scene.clip_from_world * i.position.extend(1.0);
            c.z / c.w
        })
        .filter(|z| (0.0..=1.0).contains(z))
        .collect();
    depths.sort_by(f32::total_cmp);
    let mut rng = SceneRng::new(seed);
    let mut depth = vec![far; (WIDTH * HEIGHT) as usize];
    for _ in 0..6 {
        let (x0, y0) = (
            rng.range(0.0, WIDTH as f32) as u32,
            rng.range(0.0, HEIGHT as f32) as u32,
        );
        let (w, h) = (rng.range(4.0, 30.0) as u32, rng.range(4.0, 20.0) as u32);
        let d = if depths.is_empty() {
            0.5
        } else {
            depths[rng.range(0.0, depths.len() as f32) as usize % depths.len()]
        };
        for y in y0..(y0 + h).min(HEIGHT) {
            for x in x0..(x0 + w).min(WIDTH) {
                depth[(y * WIDTH + x) as usize] = d;
            }
        }
    }
    depth
}

/// A 2D texture `HEIGHT` rows high for the tests.
fn test_texture(
    ctx: &GpuContext,
    format: wgpu::TextureFormat,
    width: u32,
    samples: u32,
    usage: wgpu::TextureUsages,
) -> wgpu::Texture {
    ctx.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("test depth"),
        size: wgpu::Extent3d {
            width,
            height: HEIGHT,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: samples,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage,
        view_formats: &[],
    })
}

/// Uploads `depth` as an R32Float texture and builds its pyramid on the GPU
/// (with no builder, writes the CPU mirror's levels); checks it equals the
/// CPU mirror's and returns both.
fn build_pyramid(
    ctx: &GpuContext,
    builder: Option<&PyramidBuilder>,
    depth: &[f32],
    order: DepthOrder,
) -> (DepthPyramid, CpuPyramid) {
    let texture = test_texture(
        ctx,
        wgpu::TextureFormat::R32Float,
        WIDTH,
        1,
        wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
    );
    ctx.queue.write_texture(
        texture.as_image_copy(),
        bytemuck::cast_slice(depth),
        wgpu::TexelCopyBufferLayout {
            offset: 0,
            bytes_per_row: Some(WIDTH * 4),
            rows_per_image: Some(HEIGHT),
        },
        texture.size(),
    );
    let pyramid = DepthPyramid::new(&ctx.device, WIDTH, HEIGHT, order).unwrap();
    let cpu = CpuPyramid::build(WIDTH, HEIGHT, depth, order).unwrap();
    match builder {
        Some(builder) => {
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            builder
                .build(&ctx.device, &mut encoder, &texture, &pyramid)
                .unwrap();
            ctx.queue.submit([encoder.finish()]);
        }
        None => pyramid.write_levels(&ctx.queue, &cpu).unwrap(),
    }
    assert_eq!(
        pyramid.read_back(&ctx.device, &ctx.queue).unwrap(),
        cpu,
        "GPU pyramid"
    );
    (pyramid, cpu)
}

fn both(a: SphereClass, b: SphereClass) -> SphereClass {
    use SphereClass::*;
    match (a, b) {
        (Outside, _) | (_, Outside) => Outside,
        (Inside, Inside) => Inside,
        _ => Borderline,
    }
}

/// Per instance: its class in `frustum` (band included) and past the
/// pyramid.
fn classes(
    format: InstanceFormat,
    bytes: &[u8],
    scene: &Scene,
    frustum: &Frustum,
    hiz: Option<(&OcclusionCamera, &CpuPyramid)>,
) -> Vec<SphereClass> {
    (0..scene.instances.len())
        .map(|i| match format.world_sphere(bytes, i, scene.bounds) {
            None => SphereClass::Outside,
            Some(s) => {
                let f = frustum.classify(&s);
                match hiz {
                    Some((camera, pyramid)) if f != SphereClass::Outside => {
                        both(f, camera.classify(&s, pyramid).unwrap())
                    }
                    _ => f,
                }
            }
        })
        .collect()
}

/// The reference of a list: `classes` of the instances `keep` lets through.
fn reference(classes: &[SphereClass], keep: impl Fn(usize) -> bool) -> Reference {
    let mut r = Reference::default();
    for (i, class) in classes.iter().enumerate() {
        if !keep(i) {
            continue;
        }
        match class {
            SphereClass::Inside => r.visible.push(i as u32),
            SphereClass::Borderline => r.borderline.push(i as u32),
            SphereClass::Outside => {}
        }
    }
    r
}

fn check_list(what: &str, reference: &Reference, got: &[u32], ordered: bool) {
    if let Err(e) = reference.check(got) {
        panic!("{what}: {e}");
    }
    let n = reference.visible.len() + reference.borderline.len();
    assert!(
        reference.borderline.len() <= 2 + n / 10,
        "{what}: {} of {n} borderline is too many",
        reference.borderline.len()
    );
    if ordered {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{what}: out of order");
    }
}

/// Two frames: a first with an empty history (the early phase keeps
/// nothing, the late phase all that passes the pyramid), and a second with
/// other occluders, whose early phase keeps what the first frame's history
/// says.
pub fn two_frames(
    ctx: &GpuContext,
    culler: &Culler,
    builder: Option<&PyramidBuilder>,
    scene: &Scene,
    camera_kind: CameraKind,
    levels: bool,
    what: &str,
) -> usize {
    two_frames_with(
        ctx,
        culler,
        builder,
        scene,
        camera_kind,
        levels,
        what,
        false,
        test_jitter(levels),
    )
    .0
}

/// [`two_frames`] with the scene sorted into cells and both phases culled
/// by cells: also the cells kept in the last late phase, and the cells.
pub fn two_frames_by_cells(
    ctx: &GpuContext,
    culler: &Culler,
    builder: &PyramidBuilder,
    scene: &Scene,
    camera_kind: CameraKind,
    levels: bool,
    what: &str,
) -> (usize, u32, u32) {
    two_frames_with(
        ctx,
        culler,
        Some(builder),
        scene,
        camera_kind,
        levels,
        what,
        true,
        test_jitter(levels),
    )
}

/// The jitter the phases' tests give the camera: half a pixel (TAA's) in
/// the runs with levels of detail, none in the others, so that both are
/// checked against the CPU mirror.
fn test_jitter(levels: bool) -> f32 {
    if levels { 0.5 } else { 0.0 }
}

/// [`two_frames`], and with `by_cells` the scene sorted into cells and both
/// phases culled by cells, the camera jittered by `jitter` pixels; also the
/// cells kept in the last late phase and the cells (zero without cells).
#[allow(clippy::too_many_arguments)]
pub fn two_frames_with(
    ctx: &GpuContext,
    culler: &Culler,
    builder: Option<&PyramidBuilder>,
    scene: &Scene,
    camera_kind: CameraKind,
    levels: bool,
    what: &str,
    by_cells: bool,
    jitter: f32,
) -> (usize, u32, u32) {
    let (sorted, layout) = crate::cells::sorted(scene, culler);
    let (scene, cells) = if by_cells {
        let cells =
            cull_core::CellIndex::new(&ctx.device, culler, scene.instances.len() as u32 + 13).unwrap();
        cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
        (&sorted, Some(cells))
    } else {
        (scene, None)
    };
    let format = culler.format();
    let bytes = format.encode(&scene.instances).unwrap();
    let count = scene.instances.len() as u32;
    let capacity = count + 13;
    let input = CullInput::new(&ctx.device, format, capacity).unwrap();
    input.write(&ctx.queue, 0, &bytes).unwrap();
    let frustum = scene.frustum().unwrap();
    let frusta = match (levels, by_cells) {
        (false, _) => vec![frustum],
        (true, false) => test_levels(&frustum),
        // By cells, a cut-off that culls the farthest cells: the late
        // phase must still write their instances' history as in the
        // frustum and past the pyramid, whatever the level.
        (true, true) => {
            let metric = cull_core::SizeMetric {
                origin: glam::Vec3::ZERO,
                scale: 1.0,
                perspective: true,
            };
            frustum.detail_levels(metric, &[0.8, 0.6, 0.4, 0.2]).unwrap()
        }
    };
    // (A batch large enough to have cells past the cut-off.)
    if by_cells && levels && count >= 10_000 {
        assert!(
            layout.kept_cells(&frusta, count) < layout.kept_cells(&[frustum], count),
            "{what}: the cut-off culls no cell"
        );
    }
    let views = frusta.len() as u32;
    let early = CullTarget::with_views(&ctx.device, culler, capacity, views).unwrap();
    let late = CullTarget::with_views(&ctx.device, culler, capacity, views).unwrap();
    let mut history = OcclusionHistory::new(&ctx.device, capacity).unwrap();
    let camera = occlusion_camera(scene, jitter);
    let order = depth_order(camera_kind);
    let ordered = culler.variant().preserves_order();
    // The history is in the frustum and past the pyramid, whatever the band.
    let plain = Frustum {
        size_band: None,
        ..frustum
    };
    let mut was = vec![0u32; count as usize];
    let mut hidden = 0;
    for frame in 0..2u64 {
        let depth = occluders(scene, order, 77 + frame);
        let (pyramid, cpu_pyramid) = build_pyramid(ctx, builder, &depth, order);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let request =
            CullRequest::new(&input, &early, &frusta, scene.bounds, count).occlusion_early(&history);
        culler
            .cull(&mut encoder, &ctx.queue, maybe_by_cells(request, cells.as_ref()))
            .unwrap();
        let request = CullRequest::new(&input, &late, &frusta, scene.bounds, count).occlusion_late(
            &mut history,
            &pyramid,
            &camera,
        );
        culler
            .cull(&mut encoder, &ctx.queue, maybe_by_cells(request, cells.as_ref()))
            .unwrap();
        ctx.queue.submit([encoder.finish()]);
        let early_lists = read_views(ctx, culler, &bytes, &early, frusta.len(), count);
        let late_lists = read_views(ctx, culler, &bytes, &late, frusta.len(), count);
        for (v, f) in frusta.iter().enumerate() {
            let in_view = classes(format, &bytes, scene, f, None);
            let past = classes(format, &bytes, scene, f, Some((&camera, &cpu_pyramid)));
            let what = format!("{what} frame {frame} view {v}");
            check_list(
                &format!("{what} early"),
                &reference(&in_view, |i| was[i] != 0),
                &early_lists[v],
                ordered,
            );
            check_list(
                &format!("{what} late"),
                &reference(&past, |i| was[i] == 0),
                &late_lists[v],
                ordered,
            );
        }
        // The history: 1 for what is clearly in the frustum and past the
        // pyramid, 0 for what is clearly not.
        let now = history.read_back(&ctx.device, &ctx.queue, count).unwrap();
        let expected = classes(format, &bytes, scene, &plain, Some((&camera, &cpu_pyramid)));
        check_history(&format!("{what} frame {frame}"), &now, &expected);
        let in_frustum = classes(format, &bytes, scene, &plain, None);
        hidden += in_frustum
            .iter()
            .zip(&expected)
            .filter(|(f, o)| **f == SphereClass::Inside && **o == SphereClass::Outside)
            .count();
        was = now;
    }
    let kept = cells.map_or(0, |c| c.read_kept(&ctx.device, &ctx.queue).unwrap());
    (hidden, kept, if by_cells { layout.cells() } else { 0 })
}

/// Both phases culled by cells: the same lists and history as the flat
/// phases (checked against the CPU mirror as `two_frames` does), in every
/// variant that culls cells, with the formats and output kinds of
/// `occlusion_kernels`, with and without levels; the
/// cells outside the frustum are culled, their instances' history cleared.
#[test]
fn early_and_late_phases_by_cells_are_exact_sets() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    for (i, (variant, tuning)) in forms(ctx).into_iter().enumerate() {
        for (format, output) in occlusion_kernels(i) {
            let culler = views_culler(ctx, variant, format, output, tuning, 4);
            let form = form_name(&culler);
            for (s, camera) in Camera::ALL.into_iter().enumerate() {
                let scene =
                    cull_core::scene::Scene::random(2300 + s as u64, 30_000, camera, Some(0.3)).fit(format);
                let levels = s % 2 == 1;
                let what =
                    format!("{variant:?} ({form}) {format:?} {output:?} {camera:?} levels={levels} by cells");
                let (hidden, kept, cells) =
                    two_frames_by_cells(ctx, &culler, &builder, &scene, camera, levels, &what);
                assert!(hidden > 0, "{what}: the occluders hide nothing");
                assert!(kept > 0 && kept < cells, "{what}: kept {kept} of {cells} cells");
            }
        }
    }
}

/// Both phases by cells on the smallest batches (none, one instance): the
/// lists and history are the CPU mirror's.
#[test]
fn phases_by_cells_on_tiny_batches() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    for (variant, tuning) in forms(ctx) {
        let culler = views_culler(
            ctx,
            variant,
            InstanceFormat::PosQuat,
            OutputKind::Indices,
            tuning,
            4,
        );
        for n in [0, 1, 3] {
            for levels in [false, true] {
                let camera = CameraKind::InfiniteReverseZ;
                let scene = edge_scene(2600 + n as u64, n, camera, InstanceFormat::PosQuat);
                let what = format!(
                    "{variant:?} ({}) n={n} levels={levels} by cells",
                    form_name(&culler)
                );
                two_frames_by_cells(ctx, &culler, &builder, &scene, camera, levels, &what);
            }
        }
    }
}

/// By cells, the late phase reads only the kept cells, so it clears the
/// history of the others: an instance visible two frames ago (the half the
/// phase writes again) whose cell the turned camera culls must not keep its
/// old 1, or the next early phase would draw it.
#[test]
fn late_phase_by_cells_clears_the_history_of_culled_cells() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let format = InstanceFormat::PosQuat;
    let camera_kind = CameraKind::InfiniteReverseZ;
    let order = depth_order(camera_kind);
    for (variant, tuning) in forms(ctx) {
        let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 1);
        let scene = cull_core::scene::Scene::random(2400, 20_000, camera_kind, Some(0.5));
        let (scene, layout) = crate::cells::sorted(&scene, &culler);
        // The same camera turned half a turn about its own vertical axis:
        // what it saw is now behind it.
        let projection = camera_kind.projection();
        let turned = Scene {
            clip_from_world: projection
                * glam::Mat4::from_rotation_y(std::f32::consts::PI)
                * projection.inverse()
                * scene.clip_from_world,
            ..scene.clone()
        };
        let count = scene.instances.len() as u32;
        let bytes = format.encode(&scene.instances).unwrap();
        let input = CullInput::new(&ctx.device, format, count).unwrap();
        input.write(&ctx.queue, 0, &bytes).unwrap();
        let cells = cull_core::CellIndex::new(&ctx.device, &culler, count).unwrap();
        cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
        let early = CullTarget::new(&ctx.device, &culler, count).unwrap();
        let late = CullTarget::new(&ctx.device, &culler, count).unwrap();
        let mut history = OcclusionHistory::new(&ctx.device, count).unwrap();
        let what = format!("{variant:?} ({})", form_name(&culler));
        let mut seen_before = 0;
        for frame in [&scene, &scene, &turned] {
            let frusta = [frame.frustum().unwrap()];
            let camera = occlusion_camera(frame, 0.0);
            let depth = occluders(frame, order, 5);
            let (pyramid, cpu_pyramid) = build_pyramid(ctx, Some(&builder), &depth, order);
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            let request = CullRequest::new(&input, &early, &frusta, frame.bounds, count)
                .occlusion_early(&history)
                .by_cells(&cells);
            culler.cull(&mut encoder, &ctx.queue, request).unwrap();
            let request = CullRequest::new(&input, &late, &frusta, frame.bounds, count)
                .occlusion_late(&mut history, &pyramid, &camera)
                .by_cells(&cells);
            culler.cull(&mut encoder, &ctx.queue, request).unwrap();
            ctx.queue.submit([encoder.finish()]);
            let now = history.read_back(&ctx.device, &ctx.queue, count).unwrap();
            let expected = classes(format, &bytes, frame, &frusta[0], Some((&camera, &cpu_pyramid)));
            check_history(&what, &now, &expected);
            if std::ptr::eq(frame, &scene) {
                seen_before = now.iter().filter(|&&b| b == 1).count();
            }
        }
        assert!(
            seen_before > 1000,
            "{what}: too little visible to see the history cleared"
        );
        assert!(
            cells.read_kept(&ctx.device, &ctx.queue).unwrap() < layout.cells(),
            "{what}: the turned camera should cull cells"
        );
    }
}

/// A wall over the whole screen just past the near plane: by cells, the
/// late phase's cell pass tests the cells against the pyramid too, so it
/// keeps far fewer cells than the frustum does, and the lists and history
/// are still the CPU mirror's (nothing past the wall but what reaches the
/// camera).
#[test]
fn late_phase_by_cells_culls_the_cells_behind_a_wall() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let format = InstanceFormat::PosQuat;
    for camera_kind in [CameraKind::InfiniteReverseZ, CameraKind::Perspective] {
        let order = depth_order(camera_kind);
        let near = match order {
            DepthOrder::ReverseZ => 1.0,
            DepthOrder::Standard => 0.0,
        };
        for (variant, tuning) in forms(ctx) {
            let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 1);
            let what = format!("{variant:?} ({}) {camera_kind:?}", form_name(&culler));
            let scene = cull_core::scene::Scene::random(2500, 200_000, camera_kind, Some(0.5));
            let (scene, layout) = crate::cells::sorted(&scene, &culler);
            let count = scene.instances.len() as u32;
            let bytes = format.encode(&scene.instances).unwrap();
            let input = CullInput::new(&ctx.device, format, count).unwrap();
            input.write(&ctx.queue, 0, &bytes).unwrap();
            let cells = cull_core::CellIndex::new(&ctx.device, &culler, count).unwrap();
            cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
            let late = CullTarget::new(&ctx.device, &culler, count).unwrap();
            let mut history = OcclusionHistory::new(&ctx.device, count).unwrap();
            let frusta = [scene.frustum().unwrap()];
            let camera = occlusion_camera(&scene, 0.0);
            let wall = vec![near; occluders(&scene, order, 1).len()];
            let (pyramid, cpu_pyramid) = build_pyramid(ctx, Some(&builder), &wall, order);
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            let request = CullRequest::new(&input, &late, &frusta, scene.bounds, count)
                .occlusion_late(&mut history, &pyramid, &camera)
                .by_cells(&cells);
            culler.cull(&mut encoder, &ctx.queue, request).unwrap();
            ctx.queue.submit([encoder.finish()]);
            let kept = cells.read_kept(&ctx.device, &ctx.queue).unwrap();
            let in_frustum = layout.kept_cells(&frusta, count);
            assert!(
                in_frustum > 4 && kept * 4 < in_frustum,
                "{what}: the wall left {kept} of the frustum's {in_frustum} cells"
            );
            let past = classes(format, &bytes, &scene, &frusta[0], Some((&camera, &cpu_pyramid)));
            let lists = read_views(ctx, &culler, &bytes, &late, 1, count);
            check_list(
                &format!("{what} late"),
                &reference(&past, |_| true),
                &lists[0],
                culler.variant().preserves_order(),
            );
            let now = history.read_back(&ctx.device, &ctx.queue, count).unwrap();
            check_history(&what, &now, &past);
        }
    }
}

/// Asserts a history read back: 1 for what is clearly in the frustum and
/// past the pyramid, 0 for what is clearly not.
fn check_history(what: &str, history: &[u32], expected: &[SphereClass]) {
    for (i, (&bit, class)) in history.iter().zip(expected).enumerate() {
        let ok = match class {
            SphereClass::Inside => bit == 1,
            SphereClass::Outside => bit == 0,
            SphereClass::Borderline => bit <= 1,
        };
        assert!(ok, "{what}: history of {i} is {bit}, expected {class:?}");
    }
}

#[test]
fn early_and_late_phases_are_exact_sets() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    for (i, (variant, tuning)) in forms(ctx).into_iter().enumerate() {
        for (format, output) in occlusion_kernels(i) {
            let culler = views_culler(ctx, variant, format, output, tuning, 4);
            let form = form_name(&culler);
            let mut hidden = 0;
            for (s, &size) in SIZES.iter().enumerate() {
                let camera = Camera::ALL[(s + format_index(format)) % Camera::ALL.len()];
                let scene = edge_scene(s as u64 + 1700, size, camera, format);
                let levels = s % 2 == 1;
                let what =
                    format!("{variant:?} ({form}) {format:?} {output:?} n={size} {camera:?} levels={levels}");
                hidden += two_frames(ctx, &culler, Some(&builder), &scene, camera, levels, &what);
            }
            // The occluders hide some clearly visible instances: a test
            // that never culls anything by occlusion would pass the rest.
            assert!(
                hidden > 100,
                "{variant:?} {format:?}: only {hidden} hidden by occluders"
            );
        }
    }
}

/// A jittered camera (temporal anti-aliasing) widens every sphere's screen
/// rectangle by its jitter: with a jitter of a few pixels the occluders hide
/// fewer instances than without, and both phases still equal the CPU
/// mirror, which widens the same (so a late phase that ignored the jitter
/// would fail the exact sets).
#[test]
fn a_jittered_camera_hides_less() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let format = InstanceFormat::PosQuat;
    let (variant, tuning) = forms(ctx)[0];
    let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 1);
    let camera = CameraKind::InfiniteReverseZ;
    let scene = edge_scene(1750, 20_000, camera, format);
    let hidden = |jitter: f32| {
        let what = format!("{variant:?} {format:?} jitter {jitter}");
        two_frames_with(
            ctx,
            &culler,
            Some(&builder),
            &scene,
            camera,
            false,
            &what,
            false,
            jitter,
        )
        .0
    };
    let (still, jittered) = (hidden(0.0), hidden(4.0));
    assert!(
        jittered < still && still > 100,
        "hidden without jitter: {still}, with 4 pixels: {jittered}"
    );
}

/// The pyramid of a depth texture of `samples` samples per pixel into which
/// one triangle (`corners`, in clip space) was drawn at depth 0.25 over a
/// clear of 0 (the far depth of reverse-Z).
fn pyramid_of_triangle(
    ctx: &GpuContext,
    builder: &PyramidBuilder,
    samples: u32,
    corners: [[f32; 2]; 3],
) -> CpuPyramid {
    let texture = test_texture(
        ctx,
        wgpu::TextureFormat::Depth32Float,
        WIDTH,
        samples,
        wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::RENDER_ATTACHMENT,
    );
    let view = texture.create_view(&Default::default());
    let pyramid = DepthPyramid::new(&ctx.device, WIDTH, HEIGHT, DepthOrder::ReverseZ).unwrap();
    let [a, b, c] = corners.map(|[x, y]| format!("vec2<f32>({x:?}, {y:?})"));
    let module = ctx.device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            format!(
                "@vertex fn main(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {{
                    let corners = array<vec2<f32>, 3>({a}, {b}, {c});
                    return vec4<f32>(corners[i], 0.25, 1.0);
                }}"
            )
            .into(),
        ),
    });
    let pipeline = ctx
        .device
        .create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: None,
            layout: None,
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            primitive: Default::default(),
            depth_stencil: Some(wgpu::DepthStencilState {
                format: wgpu::TextureFormat::Depth32Float,
                depth_write_enabled: Some(true),
                depth_compare: Some(wgpu::CompareFunction::Always),
                stencil: Default::default(),
                bias: Default::default(),
            }),
            multisample: wgpu::MultisampleState {
                count: samples,
                ..Default::default()
            },
            fragment: None,
            multiview_mask: None,
            cache: None,
        });
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("draw depth"),
            color_attachments: &[],
            depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                view: &view,
                depth_ops: Some(wgpu::Operations {
                    load: wgpu::LoadOp::Clear(0.0),
                    store: wgpu::StoreOp::Store,
                }),
                stencil_ops: None,
            }),
            timestamp_writes: None,
            occlusion_query_set: None,
            multiview_mask: None,
        });
        pass.set_pipeline(&pipeline);
        pass.draw(0..3, 0..1);
    }
    builder
        .build(&ctx.device, &mut encoder, &texture, &pyramid)
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    let got = pyramid.read_back(&ctx.device, &ctx.queue).unwrap();
    assert_eq!(got.levels.len() as u32, pyramid.levels());
    got
}

/// A depth texture a triangle was drawn into builds the pyramid of its
/// depth, single-sampled and multisampled: a triangle over the whole
/// screen gives its depth at every level, and a multisampled pixel that a
/// triangle's edge crosses takes its farthest sample (a pixel is hidden
/// only where all of its samples are).
#[test]
fn pyramid_from_depth_textures() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    for samples in [1, 4] {
        let got = pyramid_of_triangle(ctx, &builder, samples, [[-1.0, -1.0], [3.0, -1.0], [-1.0, 3.0]]);
        for (k, level) in got.levels.iter().enumerate() {
            assert!(
                level.iter().all(|&d| d == 0.25),
                "{samples} samples, level {k}: {level:?}"
            );
        }
    }
    // Edges at several slopes through the pixels.
    let triangle = [[-0.9, -0.8], [0.7, -0.3], [-0.2, 0.9]];
    let centres = &pyramid_of_triangle(ctx, &builder, 1, triangle).levels[0];
    let farthest = &pyramid_of_triangle(ctx, &builder, 4, triangle).levels[0];
    assert!(farthest.iter().all(|&d| d == 0.0 || d == 0.25), "{farthest:?}");
    // Where a pixel's centre is not covered, neither are all its samples.
    let nearer = centres
        .iter()
        .zip(farthest)
        .filter(|&(&c, &f)| c == 0.0 && f != 0.0)
        .count();
    assert_eq!(
        nearer, 0,
        "pixels whose farthest sample is nearer than their centre"
    );
    // And along the edges some pixels have their centre covered but not
    // every sample: the farthest sample is the clear.
    let edge = centres
        .iter()
        .zip(farthest)
        .filter(|&(&c, &f)| c == 0.25 && f == 0.0)
        .count();
    let inside = farthest.iter().filter(|&&f| f == 0.25).count();
    assert!(edge > 0 && inside > 0, "{edge} edge pixels, {inside} inside");
}

/// Bad input: a pyramid of another size, a texture that is no depth, views
/// of several cameras, a history too small: typed errors, nothing recorded.
#[test]
fn occlusion_refuses_bad_input() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let pyramid = DepthPyramid::new(&ctx.device, WIDTH, HEIGHT, DepthOrder::ReverseZ).unwrap();
    let texture = |format, width| test_texture(ctx, format, width, 1, wgpu::TextureUsages::TEXTURE_BINDING);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    for (t, why) in [
        (texture(wgpu::TextureFormat::Depth32Float, WIDTH + 1), "size"),
        (texture(wgpu::TextureFormat::Rgba8Unorm, WIDTH), "format"),
    ] {
        assert!(
            matches!(
                builder.build(&ctx.device, &mut encoder, &t, &pyramid),
                Err(CullError::InvalidParameter(_))
            ),
            "{why}"
        );
    }
    assert!(matches!(
        DepthPyramid::new(&ctx.device, 0, 4, DepthOrder::ReverseZ),
        Err(CullError::InvalidParameter(_))
    ));

    let format = InstanceFormat::PosQuat;
    let culler = views_culler(
        ctx,
        variants(ctx)[0],
        format,
        OutputKind::Indices,
        Default::default(),
        2,
    );
    let scene = edge_scene(5, 100, CameraKind::InfiniteReverseZ, format);
    let input = CullInput::new(&ctx.device, format, 100).unwrap();
    let target = CullTarget::with_views(&ctx.device, &culler, 100, 2).unwrap();
    let frustum = scene.frustum().unwrap();
    let other = view_frusta(&scene, 3, 2)[1];
    let two_cameras = [frustum, other];
    let mut history = OcclusionHistory::new(&ctx.device, 100).unwrap();
    let camera = occlusion_camera(&scene, 0.0);
    {
        let mut late = |frusta: &[Frustum], camera: &OcclusionCamera| {
            let request = CullRequest::new(&input, &target, frusta, scene.bounds, 100).occlusion_late(
                &mut history,
                &pyramid,
                camera,
            );
            culler.cull(&mut encoder, &ctx.queue, request)
        };
        // Two cameras: an occlusion cull's views must be one camera's.
        assert!(matches!(
            late(&two_cameras, &camera),
            Err(CullError::InvalidParameter(_))
        ));
        // A jitter must be finite and not negative: refused when the camera
        // is made, and by the late phase when the public field is set.
        let one_camera = [frustum];
        for bad in [-0.5, f32::NAN, f32::INFINITY] {
            assert!(
                matches!(camera.with_jitter(bad), Err(CullError::InvalidParameter(_))),
                "{bad}"
            );
            let jittered = OcclusionCamera {
                jitter: bad,
                ..camera
            };
            assert!(
                matches!(late(&one_camera, &jittered), Err(CullError::InvalidParameter(_))),
                "jitter {bad}"
            );
        }
    }
    let small = OcclusionHistory::new(&ctx.device, 50).unwrap();
    let one = [frustum];
    let request = CullRequest::new(&input, &target, &one, scene.bounds, 100).occlusion_early(&small);
    assert!(matches!(
        culler.cull(&mut encoder, &ctx.queue, request),
        Err(CullError::CountExceedsCapacity { .. })
    ));
}

/// On wgpu's GL backend both phases refuse with a typed error and record
/// nothing.
pub fn refused_on_gl(ctx: &GpuContext, culler: &Culler, scene: &Scene) {
    let count = scene.instances.len() as u32;
    let capacity = count.max(1);
    let input = CullInput::new(&ctx.device, culler.format(), capacity).unwrap();
    let target = CullTarget::new(&ctx.device, culler, capacity).unwrap();
    let mut history = OcclusionHistory::new(&ctx.device, capacity).unwrap();
    let pyramid = DepthPyramid::new(&ctx.device, WIDTH, HEIGHT, DepthOrder::ReverseZ).unwrap();
    let frusta = [scene.frustum().unwrap()];
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let request = CullRequest::new(&input, &target, &frusta, scene.bounds, count).occlusion_early(&history);
    let early = culler.cull(&mut encoder, &ctx.queue, request);
    assert!(
        matches!(early, Err(CullError::UnsupportedBackend { .. })),
        "{early:?}"
    );
    let camera = occlusion_camera(scene, 0.0);
    let request = CullRequest::new(&input, &target, &frusta, scene.bounds, count).occlusion_late(
        &mut history,
        &pyramid,
        &camera,
    );
    let late = culler.cull(&mut encoder, &ctx.queue, request);
    assert!(
        matches!(late, Err(CullError::UnsupportedBackend { .. })),
        "{late:?}"
    );
}

/// A sphere that overflows `f32` (a scale of 10³⁸ on a unit mesh) may cover
/// anything: the late phase keeps it behind a wall that hides an ordinary
/// sphere beside it, in every variant, and the CPU mirror agrees.
#[test]
fn an_overflowed_sphere_survives_the_late_phase() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let camera_kind = CameraKind::InfiniteReverseZ;
    let proj = camera_kind.projection();
    // Looking down -Z from the origin; a wall 5 units away over the screen.
    let wall = {
        let c = proj * glam::Vec4::new(0.0, 0.0, -5.0, 1.0);
        c.z / c.w
    };
    let scene = Scene {
        clip_from_world: proj,
        bounds: cull_core::Sphere::new(Vec3::ZERO, 1.0),
        instances: vec![
            cull_core::Instance::from_position(Vec3::new(0.0, 0.0, -20.0)),
            cull_core::Instance {
                scale: 1.0e38,
                ..cull_core::Instance::from_position(Vec3::new(0.5, 0.0, -20.0))
            },
        ],
    };
    let camera = OcclusionCamera::from_clip_from_world(proj, Vec3::ZERO).unwrap();
    let (pyramid, cpu) = build_pyramid(
        ctx,
        Some(&builder),
        &vec![wall; (WIDTH * HEIGHT) as usize],
        DepthOrder::ReverseZ,
    );
    let format = InstanceFormat::PosQuat;
    let bytes = format.encode(&scene.instances).unwrap();
    let spheres: Vec<_> = (0..2)
        .map(|i| format.world_sphere(&bytes, i, scene.bounds).unwrap())
        .collect();
    assert_eq!(camera.classify(&spheres[0], &cpu).unwrap(), SphereClass::Outside);
    assert_eq!(camera.classify(&spheres[1], &cpu).unwrap(), SphereClass::Inside);
    for (variant, tuning) in forms(ctx) {
        let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 1);
        let input = CullInput::new(&ctx.device, format, 2).unwrap();
        input.write(&ctx.queue, 0, &bytes).unwrap();
        let target = CullTarget::new(&ctx.device, &culler, 2).unwrap();
        let mut history = OcclusionHistory::new(&ctx.device, 2).unwrap();
        let frusta = [scene.frustum().unwrap()];
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let request = CullRequest::new(&input, &target, &frusta, scene.bounds, 2).occlusion_late(
            &mut history,
            &pyramid,
            &camera,
        );
        culler.cull(&mut encoder, &ctx.queue, request).unwrap();
        ctx.queue.submit([encoder.finish()]);
        let kept = read_views(ctx, &culler, &bytes, &target, 1, 2);
        assert_eq!(kept[0], [1], "{variant:?} ({})", form_name(&culler));
    }
}

/// `scene` seen from `offset` away from the world's origin (instances and
/// camera moved together), and, when `mirror`, through a mirrored view.
pub fn moved_scene(scene: &Scene, offset: Vec3, mirror: bool) -> Scene {
    let mut moved = scene.clone();
    for instance in &mut moved.instances {
        instance.position += offset;
    }
    let flip = if mirror {
        glam::Mat4::from_scale(Vec3::new(-1.0, 1.0, 1.0))
    } else {
        glam::Mat4::IDENTITY
    };
    moved.clip_from_world = (scene.clip_from_world.as_dmat4()
        * flip.as_dmat4()
        * glam::DMat4::from_translation(-offset.as_dvec3()))
    .as_mat4();
    moved
}

/// Far from the world's origin and through a mirrored view, both phases
/// still keep exactly what the CPU mirror keeps, in every variant: the
/// projection works relative to the camera, and a mirrored matrix's box
/// corners bound its projection as any other's. (Farther out the same holds,
/// but the slack, relative to the coordinates' size as the frustum test's
/// is, makes more spheres borderline than `check_list` allows: at 3·10⁵,
/// a sixth of those kept.)
#[test]
fn occlusion_far_from_the_origin_and_mirrored() {
    let ctx = gpu();
    let builder = PyramidBuilder::new(&ctx.device).unwrap();
    let format = InstanceFormat::PosQuat;
    for (variant, tuning) in forms(ctx) {
        let culler = views_culler(ctx, variant, format, OutputKind::Indices, tuning, 4);
        let form = form_name(&culler);
        for (s, (offset, mirror)) in [
            (Vec3::new(3.0e4, -2.0e4, 1.0e4), false),
            (Vec3::ZERO, true),
            (Vec3::new(-1.0e3, 0.0, 4.0e3), true),
        ]
        .into_iter()
        .enumerate()
        {
            let camera = Camera::ALL[s % Camera::ALL.len()];
            let scene = moved_scene(&edge_scene(s as u64 + 2100, 4099, camera, format), offset, mirror);
            let what = format!("{variant:?} ({form}) offset {offset} mirrored {mirror} {camera:?}");
            let hidden = two_frames(ctx, &culler, Some(&builder), &scene, camera, s == 1, &what);
            assert!(hidden > 0, "{what}: the occluders hide nothing");
        }
    }
}
