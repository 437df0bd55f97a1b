//! The pixel splat (`PixelSplatter`): every form's survivors, in every
//! format, claim the pixels the CPU mirror (`cpu::splat`) gives them. Two
//! checks: on scenes whose projections are exact in f32 (dyadic positions,
//! scales, half turns and matrices, clip `w` a power of two; many
//! instances on one pixel and at one depth; the packed format's inexact
//! quaternions turning only a zero offset) the keys and ids equal the
//! mirror's pixel for pixel, forward and reverse depth, at the ends of the
//! depth range and behind the eye, one list or two sharing the target in
//! either order; on random scenes, where the GPU's projection may differ
//! from the CPU's in the last bits, every pixel the GPU claims is one its
//! instance falls in up to that rounding, and the pixels that differ are
//! few.

use crate::harness::{Camera, Job, assert_exact, culler, gpu, reference, topic_kernels};
use cull_core::cpu::SplatList;
use cull_core::scene::{Scene, SceneRng};
use cull_core::{
    CullError, Culler, GpuContext, Instance, InstanceFormat, OutputKind, PixelSplatDesc, PixelSplatSource,
    PixelSplatTarget, PixelSplatView, PixelSplatter, Sphere,
};
use glam::{Mat4, Quat, Vec3, Vec4};

/// The variant a culler takes by default on this device.
fn best(ctx: &GpuContext) -> cull_core::ScanVariant {
    cull_core::ScanVariant::best_available(ctx.device.features()).unwrap()
}

/// A target not a power of two wide, so rows are counted right.
const SIZE: (u32, u32) = (24, 10);

/// The mesh-space point splatted: off the origin in x and y, so that it
/// turns with the instance, but not in z, so that a perspective view's clip
/// `w` stays the instance's depth; the packed format's quaternions are
/// not exact, so there it is the origin, which every rotation keeps.
fn center(format: InstanceFormat) -> Vec3 {
    if format == InstanceFormat::Packed16 {
        Vec3::ZERO
    } else {
        Vec3::new(0.25, -0.5, 0.0)
    }
}

/// Reverse-Z perspective (clip w = -z, depth 0.5 / -z) and a forward-Z
/// orthographic view (depth (-z - 1) / 8), both with dyadic entries.
fn exact_views() -> [(PixelSplatView, &'static [f32]); 2] {
    let perspective = Mat4::from_cols(
        Vec4::new(1.0, 0.0, 0.0, 0.0),
        Vec4::new(0.0, 2.0, 0.0, 0.0),
        Vec4::new(0.0, 0.0, 0.0, -1.0),
        Vec4::new(0.0, 0.0, 0.5, 0.0),
    );
    let orthographic = Mat4::from_cols(
        Vec4::new(0.125, 0.0, 0.0, 0.0),
        Vec4::new(0.0, 0.25, 0.0, 0.0),
        Vec4::new(0.0, 0.0, -0.125, 0.0),
        Vec4::new(0.0, 0.0, -0.125, 1.0),
    );
    let view = |clip_from_world, reverse_z| PixelSplatView {
        clip_from_world,
        reverse_z,
    };
    [
        (view(perspective, true), &[-2.0, -4.0, -8.0, -16.0]),
        (view(orthographic, false), &[-1.5, -2.0, -3.0, -5.0]),
    ]
}

/// `n` instances on a grid of quarter units at the depths `depths` (many
/// share a pixel and a depth), turned by half turns and scaled by powers
/// of two, so every transformed point and projection is exact.
fn exact_scene(seed: u64, n: usize, view: &PixelSplatView, depths: &[f32], format: InstanceFormat) -> Scene {
    let mut rng = SceneRng::new(seed);
    let turns = [
        Quat::IDENTITY,
        Quat::from_xyzw(1.0, 0.0, 0.0, 0.0),
        Quat::from_xyzw(0.0, 0.0, 1.0, 0.0),
    ];
    let pick = |rng: &mut SceneRng, k: usize| (rng.range(0.0, k as f32) as usize).min(k - 1);
    let instances = (0..n)
        .map(|_| {
            let z = depths[pick(&mut rng, depths.len())];
            let grid = |rng: &mut SceneRng, half: f32| (rng.range(-half, half) * 4.0).round() / 4.0;
            // A little past the view's edges at this depth.
            let m = view.clip_from_world;
            let w = m.z_axis.w * z + m.w_axis.w;
            let half = Vec3::new(1.1 * w / m.x_axis.x, 1.1 * w / m.y_axis.y, 0.0);
            Instance {
                position: Vec3::new(grid(&mut rng, half.x), grid(&mut rng, half.y), z),
                rotation: turns[pick(&mut rng, turns.len())],
                scale: [0.5, 1.0, 2.0][pick(&mut rng, 3)],
            }
        })
        .collect();
    Scene {
        clip_from_world: view.clip_from_world,
        bounds: Sphere::new(Vec3::ZERO, 0.1),
        instances,
    }
    .fit(format)
}

/// Culls each job and splats their lists (ids from 0, then past the first
/// job's capacity) into one target of `size`; returns the keys and ids.
fn splat(
    ctx: &GpuContext,
    jobs: &[(&Job, &Culler)],
    view: &PixelSplatView,
    desc: PixelSplatDesc,
    size: (u32, u32),
) -> (Vec<u32>, Vec<u32>) {
    let splatter = PixelSplatter::new(&ctx.device, desc);
    let pixels = PixelSplatTarget::new(&ctx.device, size, jobs.len() as u32).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let mut sources = Vec::new();
    let plain: Vec<&Job> = jobs.iter().map(|j| j.0).collect();
    for (k, (job, culler)) in jobs.iter().enumerate() {
        culler.cull(&mut encoder, &ctx.queue, job.request()).unwrap();
        sources.push(PixelSplatSource {
            input: &job.input,
            target: &job.target,
            list: 0,
            local_center: center(culler.format()),
            world_from_local: place(k),
            id_base: id_base(&plain, k),
        });
    }
    splatter
        .splat(&mut encoder, &ctx.queue, &pixels, view, &sources)
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    pixels.read(&ctx.device, &ctx.queue).unwrap()
}

/// Where the `k`-th list's instances are placed: the first in the world,
/// the others shifted by quarter units (exact in f32).
fn place(k: usize) -> Mat4 {
    Mat4::from_translation(Vec3::new(0.25, -0.5, 0.0) * k as f32)
}

/// The `k`-th job's first id less one: the capacities before it.
fn id_base(jobs: &[&Job], k: usize) -> u32 {
    jobs[..k].iter().map(|j| j.input.capacity()).sum()
}

/// The job's survivors (checked against the CPU reference).
fn survivors(ctx: &GpuContext, what: &str, job: &Job, scene: &Scene, format: InstanceFormat) -> Vec<u32> {
    let visible = job.target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
    let out = job.target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    let survivors: Vec<u32> = bytemuck::pod_collect_to_vec(&out);
    assert_exact(what, &reference(scene, format), &survivors);
    survivors
}

/// The mirror's keys and ids for the jobs' survivors.
fn mirror(
    jobs: &[(&Job, InstanceFormat, &[u32])],
    view: &PixelSplatView,
    size: (u32, u32),
) -> (Vec<u32>, Vec<u32>) {
    let plain: Vec<&Job> = jobs.iter().map(|j| j.0).collect();
    let lists: Vec<SplatList<'_>> = jobs
        .iter()
        .enumerate()
        .map(|(k, (job, format, survivors))| SplatList {
            format: *format,
            bytes: &job.bytes,
            survivors,
            local_center: center(*format),
            world_from_local: place(k),
            id_base: id_base(&plain, k),
        })
        .collect();
    cull_core::cpu::splat(view, size, &lists)
}

fn assert_same_pixels(what: &str, gpu: &(Vec<u32>, Vec<u32>), cpu: &(Vec<u32>, Vec<u32>)) {
    let claimed = cpu.1.iter().filter(|&&id| id != 0).count();
    for p in 0..cpu.0.len() {
        assert_eq!(
            (gpu.0[p], gpu.1[p]),
            (cpu.0[p], cpu.1[p]),
            "{what}: pixel {p} (key, id) on the GPU and the CPU ({claimed} claimed)"
        );
    }
}

/// Exact scenes: every form and format, sizes 0, 1, within a workgroup,
/// past one and many, both depth orders: the GPU's pixels are the
/// mirror's.
#[test]
fn exact_scenes_match_the_cpu_mirror() {
    let ctx = gpu();
    for (variant, tuning, format) in topic_kernels(ctx, OutputKind::Indices) {
        let culler = culler(ctx, variant, format, OutputKind::Indices, tuning);
        let what = format!("{variant:?} {format:?}");
        check_exact_scenes(ctx, &culler, &[0, 1, 255, 257, 9000], &what);
    }
}

/// Exact scenes of `sizes` through `culler`, in both views: the GPU's
/// pixels are the mirror's.
fn check_exact_scenes(ctx: &GpuContext, culler: &Culler, sizes: &[usize], what: &str) {
    let format = culler.format();
    for (view, depths) in exact_views() {
        for &n in sizes {
            let what = format!("{what} reverse_z={} n={n}", view.reverse_z);
            let scene = exact_scene(n as u64 + 7, n, &view, depths, format);
            let job = Job::new(ctx, culler, &scene, (n as u32).max(1));
            let gpu = splat(ctx, &[(&job, culler)], &view, Default::default(), SIZE);
            let kept = survivors(ctx, &what, &job, &scene, format);
            let cpu = mirror(&[(&job, format, &kept)], &view, SIZE);
            let claimed = cpu.1.iter().filter(|&&id| id != 0).count();
            assert!(n < 9000 || claimed > 200, "{what}: only {claimed} pixels claimed");
            assert_same_pixels(&what, &gpu, &cpu);
        }
    }
}

/// The splat on a device of another kind (no subgroups, wgpu's GL backend,
/// WebGPU's default limits: it binds a uniform and five storage buffers
/// and uses no subgroups): exact scenes of every format through
/// `variant`'s culler at 0, 1 and 9000 instances, in both views.
pub(crate) fn check_splat_on(ctx: &GpuContext, variant: cull_core::ScanVariant, device: &str) {
    for format in InstanceFormat::ALL {
        let culler = culler(ctx, variant, format, OutputKind::Indices, Default::default());
        let what = format!("{variant:?} {format:?} ({device})");
        check_exact_scenes(ctx, &culler, &[0, 1, 9000], &what);
    }
}

/// Two lists of two cullers and formats sharing a target, splatted in
/// either order, and dispatches wrapped into a second dimension: the same
/// pixels as the mirror's.
#[test]
fn lists_share_a_target_in_either_order() {
    let ctx = gpu();
    let formats = [InstanceFormat::PosQuat, InstanceFormat::Packed16];
    let cullers = formats.map(|f| culler(ctx, best(ctx), f, OutputKind::Indices, Default::default()));
    let (view, depths) = exact_views()[0];
    let scenes =
        [(3000, formats[0]), (5000, formats[1])].map(|(n, f)| exact_scene(n as u64, n, &view, depths, f));
    let jobs = [0, 1].map(|k| Job::new(ctx, &cullers[k], &scenes[k], scenes[k].instances.len() as u32));
    let wrapped = PixelSplatDesc {
        max_workgroups_per_dimension: Some(3),
    };
    let pairs = [(&jobs[0], &cullers[0]), (&jobs[1], &cullers[1])];
    let both = splat(ctx, &pairs, &view, wrapped, SIZE);
    let kept = [0, 1].map(|k| survivors(ctx, "two lists", &jobs[k], &scenes[k], formats[k]));
    let cpu = mirror(
        &[(&jobs[0], formats[0], &kept[0]), (&jobs[1], formats[1], &kept[1])],
        &view,
        SIZE,
    );
    assert_same_pixels("two lists, 2D dispatch", &both, &cpu);
    let ids: std::collections::BTreeSet<bool> =
        cpu.1.iter().filter(|&&id| id != 0).map(|&id| id > 3000).collect();
    assert_eq!(ids.len(), 2, "each list claims some pixels");
    let swapped = {
        // The second list first, its ids still past the first's; the
        // target cleared by hand, the splat recorded into a pass.
        let splatter = PixelSplatter::new(&ctx.device, Default::default());
        let pixels = PixelSplatTarget::new(&ctx.device, SIZE, 2).unwrap();
        let source = |k: usize| PixelSplatSource {
            input: &jobs[k].input,
            target: &jobs[k].target,
            list: 0,
            local_center: center(formats[k]),
            world_from_local: place(k),
            id_base: if k == 0 { 0 } else { 3000 },
        };
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        pixels.clear(&mut encoder);
        let mut pass = encoder.begin_compute_pass(&Default::default());
        splatter
            .splat_in_pass(&mut pass, &ctx.queue, &pixels, &view, &[source(1), source(0)])
            .unwrap();
        drop(pass);
        ctx.queue.submit([encoder.finish()]);
        pixels.read(&ctx.device, &ctx.queue).unwrap()
    };
    assert_same_pixels("two lists, the second first", &swapped, &cpu);
}

/// The ends of the depth range and the eye, in each view: a point at the
/// near end of a reverse-Z range (depth 1) or the near plane of a forward
/// one (depth 0) is kept; nearer than the near plane, past the far plane
/// and behind the eye, none (the cull keeps them all: their spheres reach
/// into the view).
#[test]
fn depth_range_ends_and_the_eye() {
    let ctx = gpu();
    let format = InstanceFormat::PosQuat;
    let culler = culler(ctx, best(ctx), format, OutputKind::Indices, Default::default());
    let [(perspective, _), (orthographic, _)] = exact_views();
    // (x, z) of each point (y 0), the first and last kept.
    let cases = [
        (
            perspective,
            [(0.25, -0.5), (-0.1, -0.25), (0.0, 0.25), (-1.0, -2.0)],
        ),
        (
            orthographic,
            [(4.0, -1.0), (-4.0, -9.0), (0.0, -0.5), (-2.0, -5.0)],
        ),
    ];
    for (view, points) in cases {
        let what = format!("reverse_z={}", view.reverse_z);
        let offset = center(format);
        let instances = points
            .iter()
            .map(|&(x, z)| Instance::from_position(Vec3::new(x, 0.0, z) - offset))
            .collect();
        let scene = Scene {
            clip_from_world: view.clip_from_world,
            bounds: Sphere::new(Vec3::ZERO, 1.0),
            instances,
        };
        let job = Job::new(ctx, &culler, &scene, 4);
        let gpu = splat(ctx, &[(&job, &culler)], &view, Default::default(), SIZE);
        let kept = survivors(ctx, &what, &job, &scene, format);
        assert_eq!(kept.len(), 4, "{what}: the cull keeps every point");
        let cpu = mirror(&[(&job, format, &kept)], &view, SIZE);
        assert_same_pixels(&what, &gpu, &cpu);
        let mut claimed: Vec<u32> = gpu.1.iter().copied().filter(|&id| id != 0).collect();
        claimed.sort();
        assert_eq!(claimed, [1, 4], "{what}: the ids of the pixels claimed");
    }
}

/// Random scenes and cameras (perspective, infinite reverse-Z,
/// orthographic): each pixel the GPU claims holds a survivor that falls in
/// it up to rounding, at the mirror's depth up to rounding, and at most a
/// few pixels in a thousand hold another instance than the mirror's.
#[test]
fn random_scenes_claim_the_pixels_they_fall_in() {
    let ctx = gpu();
    let size = (160, 90);
    for (i, camera) in Camera::ALL.into_iter().enumerate() {
        let format = InstanceFormat::ALL[i];
        let culler = culler(ctx, best(ctx), format, OutputKind::Indices, Default::default());
        let scene = Scene::random(i as u64 + 11, 20_000, camera, Some(0.5)).fit(format);
        let view = PixelSplatView {
            clip_from_world: scene.clip_from_world,
            reverse_z: camera != Camera::Perspective,
        };
        let what = format!("{camera:?} {format:?}");
        let job = Job::new(ctx, &culler, &scene, 20_000);
        let gpu = splat(ctx, &[(&job, &culler)], &view, Default::default(), size);
        let kept = survivors(ctx, &what, &job, &scene, format);
        let cpu = mirror(&[(&job, format, &kept)], &view, size);
        let mut differing = 0;
        for p in 0..gpu.1.len() {
            // Keys may differ in the last bits (checked below); ids only
            // where rounding moves a point across a pixel's edge or two
            // depths past each other.
            differing += usize::from(gpu.1[p] != cpu.1[p]);
            if gpu.1[p] == 0 {
                continue;
            }
            let index = gpu.1[p] - 1;
            assert!(
                kept.contains(&index),
                "{what}: pixel {p} holds {index}, not a survivor"
            );
            let point = cull_core::cpu::sort_point(format, &job.bytes, index as usize, center(format));
            assert!(
                falls_in(&view, point, p as u32, size),
                "{what}: instance {index} claims pixel {p} but falls elsewhere"
            );
            let depth = |key: u32| f32::from_bits(if view.reverse_z { key } else { !key });
            let (g, c) = (depth(gpu.0[p]), depth(cpu.0[p]));
            assert!(
                (g - c).abs() <= 1e-5 * c.abs().max(1e-3),
                "{what}: pixel {p} at depth {g}, mirror {c}"
            );
        }
        let claimed = cpu.1.iter().filter(|&&id| id != 0).count();
        assert!(claimed > 1000, "{what}: only {claimed} pixels claimed");
        assert!(
            differing <= 2 + claimed / 200,
            "{what}: {differing} of {claimed} pixels differ"
        );
    }
}

/// Whether `point` lands on `pixel`, or within a thousandth of a pixel of
/// it, where the GPU's rounding may put it.
fn falls_in(view: &PixelSplatView, point: Vec3, pixel: u32, (width, height): (u32, u32)) -> bool {
    let clip = view.clip_from_world * point.extend(1.0);
    let x = (clip.x / clip.w * 0.5 + 0.5) * width as f32;
    let y = (0.5 - clip.y / clip.w * 0.5) * height as f32;
    let (px, py) = ((pixel % width) as f32, (pixel / width) as f32);
    let slack = 1e-3;
    x >= px - slack && x < px + 1.0 + slack && y >= py - slack && y < py + 1.0 + slack
}

/// What a splat refuses, each with an error instead of a wgpu panic.
#[test]
fn bad_splats_are_refused() {
    let ctx = gpu();
    let format = InstanceFormat::PosQuat;
    for size in [(0, 4), (4, 0)] {
        assert!(PixelSplatTarget::new(&ctx.device, size, 1).is_err(), "{size:?}");
    }
    assert!(PixelSplatTarget::new(&ctx.device, (4, 4), 0).is_err());
    assert!(PixelSplatTarget::new(&ctx.device, (u32::MAX, u32::MAX), 1).is_err());
    let indices = culler(ctx, best(ctx), format, OutputKind::Indices, Default::default());
    let copies = culler(ctx, best(ctx), format, OutputKind::Instances, Default::default());
    let (view, depths) = exact_views()[0];
    let scene = exact_scene(1, 10, &view, depths, format);
    let job = Job::new(ctx, &indices, &scene, 10);
    let copied = Job::new(ctx, &copies, &scene, 10);
    let splatter = PixelSplatter::new(&ctx.device, Default::default());
    let pixels = PixelSplatTarget::new(&ctx.device, SIZE, 1).unwrap();
    let packed = cull_core::CullInput::new(&ctx.device, InstanceFormat::Packed16, 10).unwrap();
    let good = PixelSplatSource {
        input: &job.input,
        target: &job.target,
        list: 0,
        local_center: center(format),
        world_from_local: Mat4::IDENTITY,
        id_base: 0,
    };
    let refused = |sources: &[PixelSplatSource<'_>]| {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        splatter.splat(&mut encoder, &ctx.queue, &pixels, &view, sources)
    };
    assert!(refused(&[good]).is_ok());
    let cases = [
        (vec![good, good], "more sources than slots"),
        (
            vec![PixelSplatSource { list: 1, ..good }],
            "a list past the target's views",
        ),
        (
            vec![PixelSplatSource {
                id_base: u32::MAX - 5,
                ..good
            }],
            "ids past 32 bits",
        ),
        (
            vec![PixelSplatSource {
                input: &packed,
                ..good
            }],
            "another format's input",
        ),
        (
            vec![PixelSplatSource {
                target: &copied.target,
                ..good
            }],
            "a list of instance copies",
        ),
    ];
    for (sources, what) in cases {
        assert!(
            matches!(
                refused(&sources),
                Err(CullError::InvalidParameter(_) | CullError::FormatMismatch { .. })
            ),
            "{what} was accepted"
        );
    }
    // The last id may be u32::MAX itself.
    assert!(
        refused(&[PixelSplatSource {
            id_base: u32::MAX - 10,
            ..good
        }])
        .is_ok()
    );
}
