//! The depth sort (`DepthSorter`): every variant's survivors, in every
//! format, come out back to front exactly as the CPU reference orders them.
//! Two checks: on random scenes (random rotations, a mesh center off the
//! origin, where the GPU's and the CPU's depths may differ in the last
//! bits) the GPU's keys ascend strictly as (key, index) pairs, each within
//! rounding of the CPU's depth, over exactly the reference's survivors; on
//! scenes whose depths are exact in f32 (integer positions, many ties) the
//! order equals `cpu::back_to_front` element for element.

use crate::harness::{Camera, Job, assert_exact, culler, gpu, reference, variants};
use cull_core::scene::{Scene, SceneRng};
use cull_core::{
    CullError, DepthSortDesc, DepthSortView, DepthSorter, GpuContext, InstanceFormat, OutputKind,
    depth_sort_key,
};
use glam::{Vec3, Vec4};

/// What one sort left: the survivors in sorted order, and their keys.
struct Sorted {
    indices: Vec<u32>,
    keys: Vec<u32>,
}

/// Culls `scene` with `culler` and sorts view 0 by `order`.
fn cull_and_sort(
    ctx: &GpuContext,
    culler: &cull_core::Culler,
    scene: &Scene,
    order: &DepthSortView,
    desc: DepthSortDesc,
) -> Sorted {
    let job = Job::new(ctx, culler, scene, (scene.instances.len() as u32).max(1));
    let sorter = DepthSorter::new(&ctx.device, culler, desc).unwrap();
    let scratch = sorter.scratch(&ctx.device, &job.target).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler.cull(&mut encoder, &ctx.queue, job.request()).unwrap();
    sorter
        .sort(
            &mut encoder,
            &ctx.queue,
            (&job.input, &job.target),
            &scratch,
            0,
            order,
        )
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    let visible = job.target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
    let out = job.target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    Sorted {
        indices: bytemuck::pod_collect_to_vec(&out),
        keys: scratch
            .read_sorted_keys(&ctx.device, &ctx.queue, visible)
            .unwrap(),
    }
}

/// The depth a key stands for (`depth_sort_key` inverted).
fn key_depth(key: u32) -> f32 {
    f32::from_bits(if key >> 31 == 1 { key ^ 0x8000_0000 } else { !key })
}

fn random_order(rng: &mut SceneRng, local_center: Vec3) -> DepthSortView {
    let axis = Vec3::new(rng.range(-1.0, 1.0), rng.range(-1.0, 1.0), rng.range(-1.0, 1.0)).normalize();
    DepthSortView {
        view_from_world_row_2: axis.extend(rng.range(-50.0, 50.0)),
        local_center,
    }
}

/// Keys ascend strictly as (key, index); each key is the CPU's depth up to
/// the rounding of its terms; the survivors are the reference's.
fn assert_sorted(what: &str, scene: &Scene, format: InstanceFormat, order: &DepthSortView, sorted: &Sorted) {
    assert_exact(what, &reference(scene, format), &sorted.indices);
    assert_eq!(sorted.keys.len(), sorted.indices.len(), "{what}");
    let pairs: Vec<(u32, u32)> = sorted
        .keys
        .iter()
        .copied()
        .zip(sorted.indices.iter().copied())
        .collect();
    if let Some(w) = pairs.windows(2).position(|w| w[0] >= w[1]) {
        panic!(
            "{what}: out of order at {w}: {:?} then {:?}",
            pairs[w],
            pairs[w + 1]
        );
    }
    let bytes = format.encode(&scene.instances).unwrap();
    let r = order.view_from_world_row_2;
    for &(key, index) in &pairs {
        let p = cull_core::cpu::sort_point(format, &bytes, index as usize, order.local_center);
        let position = scene.instances[index as usize].position;
        let magnitude =
            r.w.abs() + r.truncate().length() * (p.length() + position.length() + (p - position).length());
        let (gpu_depth, cpu_depth) = (key_depth(key), order.depth(p));
        assert!(
            (gpu_depth - cpu_depth).abs() <= 16.0 * f32::EPSILON * magnitude,
            "{what}: instance {index} at depth {gpu_depth} on the GPU, {cpu_depth} on the CPU"
        );
    }
}

/// Every variant and format, at sizes 0, 1, within a tile, past one and
/// several tiles.
#[test]
fn random_scenes_sort_back_to_front() {
    let ctx = gpu();
    let mut rng = SceneRng::new(41);
    for variant in variants(ctx) {
        for format in InstanceFormat::ALL {
            let culler = culler(ctx, variant, format, OutputKind::Indices, Default::default());
            for n in [0, 1, 200, 257, 9000] {
                let scene = Scene::random(n as u64 + 3, n, Camera::Perspective, Some(0.6)).fit(format);
                let order = random_order(&mut rng, Vec3::new(0.3, -0.2, 0.1));
                let sorted = cull_and_sort(ctx, &culler, &scene, &order, Default::default());
                assert_sorted(
                    &format!("{variant:?} {format:?} n={n}"),
                    &scene,
                    format,
                    &order,
                    &sorted,
                );
            }
        }
    }
}

/// A scene whose depths are exact: instances on an integer grid (many share
/// a depth), sorted by their origins along a dyadic axis.
fn exact_scene(n: usize, format: InstanceFormat) -> (Scene, DepthSortView) {
    let mut scene = Scene::random(9, n, Camera::Perspective, Some(0.8)).fit(format);
    let mut rng = SceneRng::new(5);
    for inst in &mut scene.instances {
        let grid = |rng: &mut SceneRng| rng.range(-6.0, 6.0).round();
        inst.position = Vec3::new(grid(&mut rng), grid(&mut rng), grid(&mut rng) - 20.0);
    }
    let order = DepthSortView {
        view_from_world_row_2: Vec4::new(0.5, -0.25, 1.0, 3.0),
        local_center: Vec3::ZERO,
    };
    (scene, order)
}

/// Exact depths: the GPU's order is the CPU reference's, element for
/// element, ties in index order, for every variant (those that write
/// survivors out of order included) and format.
#[test]
fn exact_depths_match_the_cpu_order() {
    let ctx = gpu();
    for variant in variants(ctx) {
        for format in InstanceFormat::ALL {
            let culler = culler(ctx, variant, format, OutputKind::Indices, Default::default());
            let (scene, order) = exact_scene(10_000, format);
            let sorted = cull_and_sort(ctx, &culler, &scene, &order, Default::default());
            let bytes = format.encode(&scene.instances).unwrap();
            let mut set = sorted.indices.clone();
            set.sort_unstable();
            let expected = cull_core::cpu::back_to_front(format, &bytes, &set, &order);
            assert!(
                sorted.indices.len() > 500,
                "{variant:?} {format:?}: too few survivors to test"
            );
            assert_eq!(sorted.indices, expected, "{variant:?} {format:?}");
        }
    }
}

/// More tiles than the workgroups allowed along one dimension: the passes
/// dispatch in two dimensions.
#[test]
fn two_dimensional_dispatches_sort_the_same() {
    let ctx = gpu();
    let format = InstanceFormat::PosQuat;
    let culler = culler(
        ctx,
        variants(ctx)[0],
        format,
        OutputKind::Indices,
        Default::default(),
    );
    let (scene, order) = exact_scene(20_000, format);
    let wide = cull_and_sort(ctx, &culler, &scene, &order, Default::default());
    let desc = DepthSortDesc {
        max_workgroups_per_dimension: Some(3),
    };
    let folded = cull_and_sort(ctx, &culler, &scene, &order, desc);
    assert_eq!(wide.indices, folded.indices);
    assert_eq!(wide.keys, folded.keys);
}

/// The farthest first, in a view looking down −Z from the origin.
#[test]
fn farthest_first() {
    assert!(depth_sort_key(-10.0) < depth_sort_key(-1.0));
    assert!(depth_sort_key(-0.5) < depth_sort_key(0.5));
    assert!(depth_sort_key(f32::NEG_INFINITY) < depth_sort_key(-f32::MAX));
    for depth in [-3.5f32, -0.0, 0.0, 1e-30, 7.25] {
        assert_eq!(key_depth(depth_sort_key(depth)), depth);
    }
}

/// A culler of instance copies cannot be sorted; a target of another
/// culler, or a view it does not have, is refused.
#[test]
fn bad_input_is_refused() {
    let ctx = gpu();
    let variant = variants(ctx)[0];
    let copies = culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Instances,
        Default::default(),
    );
    assert!(matches!(
        DepthSorter::new(&ctx.device, &copies, Default::default()),
        Err(CullError::InvalidParameter(_))
    ));
    let indices = culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Indices,
        Default::default(),
    );
    let other = culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Indices,
        Default::default(),
    );
    let (scene, order) = exact_scene(10, InstanceFormat::PosQuat);
    let job = Job::new(ctx, &other, &scene, 10);
    let sorter = DepthSorter::new(&ctx.device, &indices, Default::default()).unwrap();
    let scratch = sorter.scratch(&ctx.device, &job.target).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let sort = |encoder: &mut wgpu::CommandEncoder, sorter: &DepthSorter, view| {
        sorter.sort(
            encoder,
            &ctx.queue,
            (&job.input, &job.target),
            &scratch,
            view,
            &order,
        )
    };
    assert!(matches!(
        sort(&mut encoder, &sorter, 0),
        Err(CullError::ForeignTarget)
    ));
    let own = DepthSorter::new(&ctx.device, &other, Default::default()).unwrap();
    assert!(matches!(
        sort(&mut encoder, &own, 1),
        Err(CullError::InvalidParameter(_))
    ));
    assert!(sort(&mut encoder, &own, 0).is_ok());
}

/// A target whose sort pairs (8 bytes a survivor) would not fit one
/// storage binding gets a typed refusal for its scratch, not a wgpu
/// validation panic: a device whose bindings hold 1 MiB, a target of 200k
/// 16 B instances (within the culler's output windows; its 1.6 MB of pairs
/// are not).
#[test]
fn scratch_past_one_binding_is_refused() {
    let adapter_limits = gpu().adapter.limits();
    let ctx = cull_core::GpuContext::with_limits(
        wgpu::Backends::all(),
        wgpu::Features::empty(),
        Some(wgpu::Limits {
            max_storage_buffer_binding_size: 1 << 20,
            ..adapter_limits
        }),
    )
    .expect("a device with 1 MiB bindings");
    let variant = variants(&ctx)[0];
    let indices = culler(
        &ctx,
        variant,
        InstanceFormat::Packed16,
        OutputKind::Indices,
        Default::default(),
    );
    let sorter = DepthSorter::new(&ctx.device, &indices, Default::default()).unwrap();
    let fits = cull_core::CullTarget::new(&ctx.device, &indices, 100_000).unwrap();
    assert!(sorter.scratch(&ctx.device, &fits).is_ok());
    let past = cull_core::CullTarget::new(&ctx.device, &indices, 200_000).unwrap();
    assert!(matches!(
        sorter.scratch(&ctx.device, &past),
        Err(CullError::InvalidParameter(_))
    ));
}
