//! Several culls recorded by one `Culler::cull_all`: each request's
//! survivors against the CPU reference as exact sets, for every variant
//! (each form), format and output kind; the unordered single-pass
//! variants' flat culls in the one pass they share, every other cull (by
//! cells, into a timed target, of another variant) in passes of its own
//! recorded with them; a target named twice refused.

use crate::harness::*;
use cull_core::GpuContext;
use cull_core::scene::Scene;
use cull_core::{
    CellIndex, CellLayout, CullError, Culler, CullerDesc, InstanceFormat, OutputKind, ScanVariant, Tuning,
};

const SIZES: [usize; 5] = [0, 1, 257, 9000, 100_003];

/// A culler like [`culler`]'s, with timestamps as asked.
fn culler_timed(
    ctx: &GpuContext,
    (variant, tuning, format): (ScanVariant, Tuning, InstanceFormat),
    output: OutputKind,
    timestamps: bool,
) -> Culler {
    let desc = CullerDesc {
        variant: Some(variant),
        allow_fallback: false,
        format,
        output,
        timestamps,
        tuning,
        ..Default::default()
    };
    Culler::new(&ctx.device, &ctx.queue, &desc).unwrap()
}

/// Whether `variant`'s flat culls share `cull_all`'s pass.
fn shares_pass(variant: ScanVariant) -> bool {
    matches!(
        variant,
        ScanVariant::SubgroupBallot | ScanVariant::SubgroupShuffle | ScanVariant::BlockAtomic
    )
}

/// Culls a scene of each size, and the largest again by cells, in one
/// `cull_all`; checks each against the reference and whether it shared
/// the pass.
fn check(ctx: &GpuContext, culler: &Culler, what: &str, timed: bool) {
    let format = culler.format();
    let scenes: Vec<_> = (SIZES.iter().enumerate())
        .map(|(s, &size)| edge_scene(s as u64 + 900, size, Camera::ALL[s % Camera::ALL.len()], format))
        .collect();
    let jobs: Vec<_> = (scenes.iter())
        .map(|scene| Job::new(ctx, culler, scene, scene.instances.len() as u32 + 33))
        .collect();
    // The largest scene again, sorted into cells and culled by them.
    let (sorted, layout) = {
        let scene = scenes.last().unwrap();
        let bytes = format.encode(&scene.instances).unwrap();
        let (_, layout) = CellLayout::sort(format, &bytes, scene.bounds, culler.tile_len()).unwrap();
        let instances = layout
            .order
            .iter()
            .map(|&i| scene.instances[i as usize])
            .collect();
        let sorted = Scene {
            instances,
            ..scene.clone()
        };
        (sorted, layout)
    };
    let by_cells_job = Job::new(ctx, culler, &sorted, sorted.instances.len() as u32 + 33);
    let cells = CellIndex::new(&ctx.device, culler, by_cells_job.count + 33).unwrap();
    cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
    let by_cells = by_cells_job.request().by_cells(&cells);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let requests = jobs.iter().map(Job::request).chain([by_cells]);
    let outcomes = culler.cull_all(&mut encoder, &ctx.queue, requests);
    ctx.queue.submit([encoder.finish()]);
    let outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    let shared = shares_pass(culler.variant()) && !timed;
    for ((job, scene), outcome) in jobs.iter().zip(&scenes).zip(&outcomes) {
        let what = format!("{what} n={}", job.count);
        assert_eq!(outcome.shared_pass, shared, "{what}: shared pass");
        let survivors = read_views(ctx, culler, &job.bytes, &job.target, 1, job.count).remove(0);
        assert_exact(&what, &reference(scene, format), &survivors);
    }
    assert!(
        !outcomes[SIZES.len()].shared_pass,
        "{what}: a cull by cells in the shared pass"
    );
    let job = &by_cells_job;
    let survivors = read_views(ctx, culler, &job.bytes, &job.target, 1, job.count).remove(0);
    assert_exact(
        &format!("{what} by cells"),
        &reference(&sorted, format),
        &survivors,
    );
}

#[test]
fn cull_all_culls_each_request_exactly() {
    let ctx = gpu();
    for output in [OutputKind::Indices, OutputKind::Instances] {
        for kernel in topic_kernels(ctx, output) {
            let culler = culler_timed(ctx, kernel, output, false);
            let what = format!(
                "{:?} ({}) {:?} {output:?}",
                kernel.0,
                form_name(&culler),
                kernel.2
            );
            check(ctx, &culler, &what, false);
        }
    }
    // Timed targets record their own passes, as `cull` does.
    if ctx.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        let kernel = (
            ScanVariant::best_available(ctx.device.features()).unwrap(),
            Tuning::default(),
            InstanceFormat::PosQuat,
        );
        let culler = culler_timed(ctx, kernel, OutputKind::Indices, true);
        check(ctx, &culler, "timed", true);
    }
}

#[test]
fn cull_all_refuses_a_target_named_twice() {
    let ctx = gpu();
    let variant = ScanVariant::best_available(ctx.device.features()).unwrap();
    let culler = culler_timed(
        ctx,
        (variant, Tuning::default(), InstanceFormat::PosQuat),
        OutputKind::Indices,
        false,
    );
    let scene = edge_scene(77, 500, Camera::Perspective, InstanceFormat::PosQuat);
    let job = Job::new(ctx, &culler, &scene, 600);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let outcomes = culler.cull_all(&mut encoder, &ctx.queue, [job.request(), job.request()]);
    ctx.queue.submit([encoder.finish()]);
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    assert!(
        matches!(outcomes[1], Err(CullError::InvalidParameter(_))),
        "{:?}",
        outcomes[1]
    );
    let survivors = read_views(ctx, &culler, &job.bytes, &job.target, 1, job.count).remove(0);
    assert_exact(
        "the first of a target named twice",
        &reference(&scene, InstanceFormat::PosQuat),
        &survivors,
    );
}
