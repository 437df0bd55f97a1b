//! Several culls recorded by one `Culler::cull_all`: each request's
//! survivors against the CPU reference as exact sets, for every variant
//! (each form), format and output kind; the unordered single-pass
//! variants' flat culls in the one pass they share, every other cull (by
//! cells, into a timed target, of another variant) in passes of its own
//! recorded with them; culls of two kernels taking turns in the shared
//! pass; a target named twice refused; a target culled from
//! one input, then another, then the first again (its bind groups are kept
//! from one cull to the next); many calls, whose shared uniforms take the
//! culler's buffers in turn and outgrow them.

use crate::harness::*;
use cull_core::GpuContext;
use cull_core::{CellIndex, CullError, Culler, CullerDesc, InstanceFormat, OutputKind, ScanVariant, Tuning};

const SIZES: [usize; 5] = [0, 1, 257, 9000, 100_003];

/// A culler like [`culler`]'s, with timestamps as asked.
fn culler_timed(
    ctx: &GpuContext,
    (variant, tuning, format): (ScanVariant, Tuning, InstanceFormat),
    output: OutputKind,
    timestamps: bool,
) -> Culler {
    let desc = CullerDesc {
        timestamps,
        ..culler_desc(variant, format, output, tuning)
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

/// Culls a scene of each of `sizes`, and the largest again by cells
/// (between them, a pass of its own), in one `cull_all`, twice (the second
/// into the same targets, whose counts the first left); checks each against
/// the reference and whether it shared the pass.
fn check(ctx: &GpuContext, culler: &Culler, what: &str, sizes: &[usize], timed: bool) {
    let format = culler.format();
    let scenes: Vec<_> = (sizes.iter().enumerate())
        .map(|(s, &size)| edge_scene(s as u64 + 900, size, Camera::ALL[s % Camera::ALL.len()], format))
        .collect();
    let jobs: Vec<_> = (scenes.iter())
        .map(|scene| Job::new(ctx, culler, scene, scene.instances.len() as u32 + 33))
        .collect();
    let largest = scenes.iter().max_by_key(|s| s.instances.len()).unwrap();
    let (sorted, layout) = crate::cells::sorted(largest, culler);
    let by_cells_job = Job::new(ctx, culler, &sorted, sorted.instances.len() as u32 + 33);
    let cells = CellIndex::new(&ctx.device, culler, by_cells_job.count + 33).unwrap();
    cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let middle = jobs.len() / 2;
        let by_cells = by_cells_job.request().by_cells(&cells);
        let requests = (jobs[..middle].iter().map(Job::request))
            .chain([by_cells])
            .chain(jobs[middle..].iter().map(Job::request));
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        outcomes = culler.cull_all(&mut encoder, &ctx.queue, requests);
        ctx.queue.submit([encoder.finish()]);
    }
    let mut outcomes: Vec<_> = outcomes.into_iter().map(Result::unwrap).collect();
    let by_cells = outcomes.remove(jobs.len() / 2);
    let shared = shares_pass(culler.variant()) && !timed;
    for ((job, scene), outcome) in jobs.iter().zip(&scenes).zip(&outcomes) {
        let what = format!("{what} n={}", job.count);
        assert_eq!(outcome.shared_pass, shared, "{what}: shared pass");
        let survivors = read_views(ctx, culler, &job.bytes, &job.target, 1, job.count).remove(0);
        assert_exact(&what, &reference(scene, format), &survivors);
    }
    assert!(
        !by_cells.shared_pass,
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

/// `cull_all` on a device of its own (another subgroup width, no
/// subgroups, wgpu's GL backend, WebGPU's limits): `variant`'s culls of
/// sizes 0, 1 and not multiples of a workgroup, with `tuning`; for a
/// variant that shares the pass, culls of two kernels in turn too.
pub fn check_cull_all_on(ctx: &GpuContext, variant: ScanVariant, tuning: Tuning, what: &str) {
    let culler = culler_timed(
        ctx,
        (variant, tuning, InstanceFormat::PosQuat),
        OutputKind::Indices,
        false,
    );
    let what = format!("{variant:?} ({}) {what}", form_name(&culler));
    check(ctx, &culler, &what, &[0, 1, 257, 4099], false);
    if shares_pass(variant) {
        check_two_kernels(ctx, &culler, &what);
    }
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
            check(ctx, &culler, &what, &SIZES, false);
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
        check(ctx, &culler, "timed", &SIZES, true);
    }
}

/// Batches of several chunks (small bindings) in a dispatch wrapped into
/// two dimensions, culled together.
#[test]
fn cull_all_across_chunks_and_two_dimensional_dispatch() {
    let ctx = gpu();
    for (variant, tuning) in forms(ctx) {
        let tuning = narrow_tuning(tuning);
        let kernel = (variant, tuning, InstanceFormat::PosQuat);
        let culler = culler_timed(ctx, kernel, OutputKind::Indices, false);
        let chunk = culler.chunk_len() as usize;
        let what = format!("{variant:?} ({}) chunk={chunk}", form_name(&culler));
        check(
            ctx,
            &culler,
            &what,
            &[chunk / 2, 2 * chunk + chunk / 3, chunk + 1],
            false,
        );
    }
}

/// One target culled from one input, another, then the first again: each
/// cull binds its own input, whatever the target kept.
#[test]
fn a_target_culled_from_another_input_binds_it() {
    let ctx = gpu();
    for (variant, tuning) in forms(ctx) {
        let kernel = (variant, tuning, InstanceFormat::PosQuat);
        let culler = culler_timed(ctx, kernel, OutputKind::Indices, false);
        let what = format!("{variant:?} ({})", form_name(&culler));
        let scenes =
            [0, 1].map(|s| edge_scene(s + 40, 3000, Camera::ALL[s as usize], InstanceFormat::PosQuat));
        let jobs = scenes.each_ref().map(|scene| Job::new(ctx, &culler, scene, 3100));
        let target = &jobs[0].target;
        for i in [0, 1, 0] {
            let job = &jobs[i];
            let frustum = std::slice::from_ref(&jobs[0].frustum);
            let request =
                cull_core::CullRequest::new(&job.input, target, frustum, job.local_bounds, job.count);
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            culler.cull(&mut encoder, &ctx.queue, request).unwrap();
            ctx.queue.submit([encoder.finish()]);
            let survivors = read_views(ctx, &culler, &job.bytes, target, 1, job.count).remove(0);
            let bytes = &job.bytes;
            let reference =
                cull_core::cpu::classify(kernel.2, bytes, job.local_bounds, &jobs[0].frustum).unwrap();
            assert_exact(&format!("{what} input {i}"), &reference, &survivors);
        }
    }
}

/// Culls of two kernels taking turns in the shared pass (meshes centred
/// on their origin take a kernel of their own): each dispatch runs its own
/// kernel however the pass orders them, though the pass sets a pipeline
/// only when it changes.
#[test]
fn shared_culls_of_two_kernels_in_turn() {
    let ctx = gpu();
    for (variant, tuning) in forms(ctx).into_iter().filter(|(v, _)| shares_pass(*v)) {
        let kernel = (variant, tuning, InstanceFormat::PosQuat);
        let culler = culler_timed(ctx, kernel, OutputKind::Indices, false);
        let what = format!("{variant:?} ({})", form_name(&culler));
        check_two_kernels(ctx, &culler, &what);
    }
}

/// Six culls in one `cull_all`, meshes off their origin and centred on it
/// in turn, each shared and an exact set.
fn check_two_kernels(ctx: &GpuContext, culler: &Culler, what: &str) {
    let format = culler.format();
    let scenes: Vec<_> = (0..6u64)
        .map(|s| {
            let camera = Camera::ALL[s as usize % Camera::ALL.len()];
            let count = 2000 + 300 * s as usize;
            match s % 2 {
                0 => edge_scene(s + 60, count, camera, format),
                _ => edge_scene_centred(s + 60, count, camera, format),
            }
        })
        .collect();
    let jobs: Vec<_> = (scenes.iter())
        .map(|scene| Job::new(ctx, culler, scene, scene.instances.len() as u32))
        .collect();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let outcomes = culler.cull_all(&mut encoder, &ctx.queue, jobs.iter().map(Job::request));
    ctx.queue.submit([encoder.finish()]);
    for ((job, scene), outcome) in jobs.iter().zip(&scenes).zip(outcomes) {
        let centred = scene.bounds.center == glam::Vec3::ZERO;
        let what = format!("{what} n={} centred={centred}", job.count);
        assert!(outcome.unwrap().shared_pass, "{what}: shared pass");
        let survivors = read_views(ctx, culler, &job.bytes, &job.target, 1, job.count).remove(0);
        assert_exact(&what, &reference(scene, format), &survivors);
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

/// Many `cull_all` calls, two to an encoder, each cull against another
/// view than the call before: each call's shared culls take their uniform
/// entries from the culler's buffer for the call's first target (one taken
/// in turn, more targets first than there are buffers), and every fourth
/// round culls more targets than the buffers hold (those past the end take
/// their own buffers, and the buffer grows). Every cull is exact for its
/// own view: an entry written over before its pass read it, or read from
/// another cull's place, would not be.
#[test]
fn shared_uniform_buffers_are_taken_in_turn_and_outgrown() {
    let ctx = gpu();
    let variant = ScanVariant::best_available(ctx.device.features()).unwrap();
    let kernel = (variant, Tuning::default(), InstanceFormat::PosQuat);
    let culler = culler_timed(ctx, kernel, OutputKind::Indices, false);
    let scenes: Vec<_> = (0..70)
        .map(|i| {
            edge_scene(
                i + 300,
                40 + i as usize,
                Camera::ALL[i as usize % Camera::ALL.len()],
                kernel.2,
            )
        })
        .collect();
    let jobs: Vec<_> = (scenes.iter())
        .map(|scene| Job::new(ctx, &culler, scene, 120))
        .collect();
    for round in 0..24 {
        let culled = if round % 4 == 3 { jobs.len() } else { 12 };
        // Each job against another job's view, other each round.
        let view = |i: usize| &jobs[(i + round) % jobs.len()].frustum;
        let request = |i: usize| {
            let job = &jobs[i];
            let frustum = std::slice::from_ref(view(i));
            cull_core::CullRequest::new(&job.input, &job.target, frustum, job.local_bounds, job.count)
        };
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        // Second calls start with five different targets: more than the
        // culler has buffers, so some take the first call's.
        let half = culled / 2 + round % 5;
        let mut outcomes = culler.cull_all(&mut encoder, &ctx.queue, (0..half).map(request));
        outcomes.extend(culler.cull_all(&mut encoder, &ctx.queue, (half..culled).map(request)));
        ctx.queue.submit([encoder.finish()]);
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let what = format!("{variant:?} round {round} target {i}");
            assert_eq!(
                outcome.unwrap().shared_pass,
                shares_pass(variant),
                "{what}: shared pass"
            );
            let job = &jobs[i];
            let survivors = read_views(ctx, &culler, &job.bytes, &job.target, 1, job.count).remove(0);
            let reference =
                cull_core::cpu::classify(kernel.2, &job.bytes, job.local_bounds, view(i)).unwrap();
            assert_exact(&what, &reference, &survivors);
        }
    }
}
