//! Cell culling (`cull_core::cells`): a batch sorted into cells and culled
//! with `CullRequest::by_cells` keeps exactly what the flat cull keeps
//! (`Ordered` in order), in every variant that culls cells, format and
//! output kind (each form with both output kinds, each output kind with
//! every format; every combination with `GPU_CULL_FULL_MATRIX=1`), size,
//! view set (one view, several, one camera's levels of detail), across
//! chunks and two-dimensional dispatches; and the cell pass does cull
//! cells, so the test cannot pass by reading everything.

use crate::harness::*;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CELLS_MIN_SKIPPED_BYTES, CellIndex, CellLayout, CullError, CullRequest, CullTarget, Culler, Frustum,
    InstanceFormat, LISTED_CELLS_MIN_SKIPPED_BYTES, OutputKind, ScanVariant, Tuning,
};

const SIZES: [usize; 5] = [0, 1, 257, 4099, 100_003];

/// The variants to cull by cells: every one available here.
fn cell_variants(ctx: &cull_core::GpuContext) -> Vec<ScanVariant> {
    variants(ctx)
}

/// A culler of `variant` for position + quaternion instances, index
/// output and up to `views` views.
fn posquat_indices(ctx: &cull_core::GpuContext, variant: ScanVariant, views: u32) -> Culler {
    views_culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Indices,
        Tuning::default(),
        views,
    )
}

/// `scene` in the order `CellLayout::sort` gives its instances.
pub fn sorted(scene: &Scene, culler: &Culler) -> (Scene, CellLayout) {
    let format = culler.format();
    let bytes = format.encode(&scene.instances).unwrap();
    let (_, layout) = CellLayout::sort(format, &bytes, scene.bounds, culler.tile_len()).unwrap();
    let instances = layout
        .order
        .iter()
        .map(|&i| scene.instances[i as usize])
        .collect();
    (
        Scene {
            instances,
            ..scene.clone()
        },
        layout,
    )
}

/// Culls sorted `scene` by cells against `frusta` (a target of `capacity`
/// instances and `views` views); each view's survivors as indices into the
/// sorted batch, and the cells kept.
pub fn run_cells(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    scene: &Scene,
    layout: &CellLayout,
    frusta: &[Frustum],
    capacity: u32,
    views: u32,
) -> (Vec<Vec<u32>>, u32) {
    let job = Job::new(ctx, culler, scene, capacity);
    let target = CullTarget::with_views(&ctx.device, culler, capacity, views).unwrap();
    let mut cells = CellIndex::new(&ctx.device, culler, capacity).unwrap();
    cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
    let (survivors, kept) = cull_cells_again(ctx, culler, scene, &job, &target, &cells, frusta);
    // The unordered variants' by_cells_if_faster lists the kept cells on
    // the CPU instead (always by cells here): the same survivors, from at
    // least the cells the mirror keeps.
    let unordered = [
        ScanVariant::SubgroupBallot,
        ScanVariant::SubgroupShuffle,
        ScanVariant::BlockAtomic,
    ];
    if unordered.contains(&culler.variant()) {
        cells.set_min_skipped_bytes(0);
        let (listed, listed_cells) = cull_listed(ctx, culler, scene, (&job, &target, &cells), layout, frusta);
        let what = format!("{:?}", culler.variant());
        let listed_cells = listed_cells.unwrap_or_else(|| panic!("{what}: the cells were not listed"));
        let count = scene.instances.len() as u32;
        for (view, (a, b)) in survivors.iter().zip(&listed).enumerate() {
            let (mut a, mut b) = (a.clone(), b.clone());
            a.sort_unstable();
            b.sort_unstable();
            assert!(
                a == b,
                "{what} view {view}: listed cells keep other instances than the cell pass"
            );
        }
        assert!(
            listed_cells >= layout.kept_cells(frusta, count),
            "{what}: listed {listed_cells} cells, fewer than the mirror's {}",
            layout.kept_cells(frusta, count)
        );
    }
    (survivors, kept)
}

/// [`run_cells`]'s cull by `by_cells_if_faster` (which must pick cells):
/// each view's survivors, and the cells it listed on the CPU.
fn cull_listed(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    scene: &Scene,
    (job, target, cells): (&Job, &CullTarget, &CellIndex),
    layout: &CellLayout,
    frusta: &[Frustum],
) -> (Vec<Vec<u32>>, Option<u32>) {
    let count = scene.instances.len() as u32;
    let request =
        CullRequest::new(&job.input, target, frusta, scene.bounds, count).by_cells_if_faster(layout, cells);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let outcome = culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    assert!(outcome.cell_pick.is_some_and(|p| p.by_cells));
    ctx.queue.submit([encoder.finish()]);
    let survivors = read_views(ctx, culler, &job.bytes, target, frusta.len(), count);
    let read = cells.read_kept(&ctx.device, &ctx.queue).unwrap();
    assert_eq!(
        Some(read),
        outcome.listed_cells.or(Some(read)),
        "the count read back is the listing's"
    );
    (survivors, outcome.listed_cells)
}

/// [`run_cells`]'s cull, into a target and cell index made before (and
/// perhaps culled into already).
pub fn cull_cells_again(
    ctx: &cull_core::GpuContext,
    culler: &Culler,
    scene: &Scene,
    job: &Job,
    target: &CullTarget,
    cells: &CellIndex,
    frusta: &[Frustum],
) -> (Vec<Vec<u32>>, u32) {
    let count = scene.instances.len() as u32;
    let request = CullRequest::new(&job.input, target, frusta, scene.bounds, count).by_cells(cells);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    ctx.queue.submit([encoder.finish()]);
    let survivors = read_views(ctx, culler, &job.bytes, target, frusta.len(), count);
    (survivors, cells.read_kept(&ctx.device, &ctx.queue).unwrap())
}

fn check(output: OutputKind) {
    let ctx = gpu();
    let mut culled_cells = 0;
    let variants = cell_variants(ctx);
    let kernels: Vec<_> = (variants.iter().enumerate())
        .flat_map(|(i, &v)| formats_turning(i, output).into_iter().map(move |f| (v, f)))
        .collect();
    let (culled, formats): (Vec<_>, Vec<_>) = kernels.iter().copied().unzip();
    assert_covers(variants.len(), &culled, &formats);
    for &(variant, format) in &kernels {
        let culler = views_culler(ctx, variant, format, output, Tuning::default(), 4);
        for (s, &size) in SIZES.iter().enumerate() {
            let camera = Camera::ALL[s % Camera::ALL.len()];
            let scene = edge_scene(s as u64 + 1900, size, camera, format);
            let (scene, layout) = sorted(&scene, &culler);
            let frustum = scene.frustum().unwrap();
            let view_sets = [
                ("one view", vec![frustum]),
                ("views", view_frusta(&scene, 19, 3)),
                ("levels", test_levels(&frustum)),
            ];
            for (name, frusta) in &view_sets {
                let what = format!("{variant:?} {format:?} {output:?} n={size} {camera:?} {name}");
                let capacity = size as u32 + 13;
                let (survivors, kept) = run_cells(ctx, &culler, &scene, &layout, frusta, capacity, 4);
                assert_views_exact(&what, &culler, &scene, frusta, &survivors);
                assert!(
                    kept <= layout.cells(),
                    "{what}: kept {kept} of {} cells",
                    layout.cells()
                );
                // The CPU mirror of the cell pass agrees but for cells
                // within rounding of a plane.
                let mirror = layout.kept_cells(frusta, size as u32);
                assert!(
                    mirror.abs_diff(kept) <= 2,
                    "{what}: GPU kept {kept} cells, CPU {mirror}"
                );
                culled_cells += layout.cells() - kept;
            }
        }
    }
    assert!(
        culled_cells > 100 || cell_variants(ctx).is_empty(),
        "the cell pass culled only {culled_cells} cells: the test would not see it"
    );
}

#[test]
fn cells_keep_what_the_flat_cull_keeps_indices() {
    check(OutputKind::Indices);
}

#[test]
fn cells_keep_what_the_flat_cull_keeps_instance_copies() {
    check(OutputKind::Instances);
}

/// A scene where the camera sees a few percent: most cells are culled, and
/// the survivors are still the flat cull's.
#[test]
fn most_cells_are_culled_when_little_is_visible() {
    let ctx = gpu();
    for variant in cell_variants(ctx) {
        let culler = posquat_indices(ctx, variant, 1);
        let scene = Scene::random(77, 200_000, CameraKind::InfiniteReverseZ, Some(0.02));
        let (scene, layout) = sorted(&scene, &culler);
        let frusta = [scene.frustum().unwrap()];
        let (survivors, kept) = run_cells(ctx, &culler, &scene, &layout, &frusta, 200_000, 1);
        assert_views_exact(
            &format!("{variant:?} 2% visible"),
            &culler,
            &scene,
            &frusta,
            &survivors,
        );
        assert!(!survivors[0].is_empty());
        assert!(
            kept * 4 < layout.cells(),
            "{variant:?}: kept {kept} of {} cells with 2% visible",
            layout.cells()
        );
    }
}

/// `count` instances filling a box in front of a perspective camera, wider
/// than its frustum near the eye and narrower far from it, dense enough
/// that many cells lie inside the frustum and many straddle its planes.
pub fn dense_box(seed: u64, count: usize) -> Scene {
    // The camera at the origin looking down -z: world space is view space.
    let camera = Scene::random(seed, 0, CameraKind::InfiniteReverseZ, None);
    let mut rng = cull_core::scene::SceneRng::new(seed);
    let instances = (0..count)
        .map(|_| cull_core::Instance {
            position: glam::Vec3::new(
                rng.range(-30.0, 30.0),
                rng.range(-20.0, 20.0),
                rng.range(-60.0, -5.0),
            ),
            rotation: rng.rotation(),
            // One scale: the packed format carries none.
            scale: 1.0,
        })
        .collect();
    Scene {
        clip_from_world: CameraKind::InfiniteReverseZ.projection(),
        instances,
        ..camera
    }
}

/// One view over a dense box sorted into `culler`'s cells: some cells
/// whole (kept untested), others straddling the planes; the survivors
/// must be the flat cull's. For the device-specific tests (subgroup
/// widths, no subgroups, the GL backend, WebGPU's limits).
pub fn check_whole_cells(ctx: &cull_core::GpuContext, culler: &Culler, views: u32, what: &str) {
    let count = 60 * culler.tile_len();
    let (scene, layout) = sorted(&dense_box(81, count as usize), culler);
    let frusta = [scene.frustum().unwrap()];
    assert!(layout.whole_cells(&frusta, count) > 0, "{what}: no whole cell");
    let (survivors, _) = run_cells(ctx, culler, &scene, &layout, &frusta, count, views);
    assert_views_exact(
        &format!("{what} whole cells"),
        culler,
        &scene,
        &frusta,
        &survivors,
    );
}

/// Whole cells (inside every view, their instances kept untested by the
/// single-pass variants): the survivors are still exactly the flat cull's
/// (`Ordered`'s in order), in every format, with one view and three, when
/// cells straddle the planes beside whole ones, and when an edit puts an
/// instance that is not finite (culled by every view) into a cell that
/// would be whole.
#[test]
fn whole_cells_keep_exactly_what_the_flat_cull_keeps() {
    let ctx = gpu();
    for variant in cell_variants(ctx) {
        for format in InstanceFormat::ALL {
            let culler = views_culler(ctx, variant, format, OutputKind::Indices, Tuning::default(), 4);
            // Cells of the same size whatever the tile.
            let count = 60 * culler.tile_len();
            let (mut scene, mut layout) = sorted(&dense_box(79, count as usize), &culler);
            let frustum = scene.frustum().unwrap();
            let whole_before = layout.whole_cells(&[frustum], count);
            // Every other cell gets an instance that is not finite, grown
            // into its bounds as an edit would be.
            let cell_len = layout.cell_len as usize;
            for cell in (0..layout.cells() as usize).step_by(2) {
                let i = cell * cell_len + cell_len / 3;
                if i < scene.instances.len() {
                    scene.instances[i].position.x = f32::NAN;
                    let bytes = format.encode(&scene.instances[i..=i]).unwrap();
                    layout.grow(format, i as u32, &bytes, scene.bounds).unwrap();
                }
            }
            let whole = layout.whole_cells(&[frustum], count);
            let what = format!("{variant:?} {format:?}");
            assert!(
                whole > 2 && whole < whole_before && whole < layout.kept_cells(&[frustum], count),
                "{what}: {whole} whole cells ({whole_before} before the edits) of {} kept: \
                 the scene must have whole cells, cells with a culled instance, and straddling ones",
                layout.kept_cells(&[frustum], count)
            );
            for frusta in [vec![frustum], view_frusta(&scene, 23, 3)] {
                let (survivors, _) = run_cells(ctx, &culler, &scene, &layout, &frusta, count, 4);
                assert_views_exact(
                    &format!("{what} {} views", frusta.len()),
                    &culler,
                    &scene,
                    &frusta,
                    &survivors,
                );
            }
        }
    }
}

/// Levels of detail with a cut-off: the cells beyond the farthest level's
/// threshold are culled by their size as well (fewer kept than by the
/// frustum alone), and every level's survivors are still the flat cull's.
#[test]
fn cells_beyond_the_farthest_level_are_culled() {
    let ctx = gpu();
    for variant in cell_variants(ctx) {
        let culler = posquat_indices(ctx, variant, 4);
        // A long avenue of instances ahead of the camera (from 5 to 2000
        // away), so that cells are small against their distance.
        let mut rng = cull_core::scene::SceneRng::new(79);
        let instances = (0..200_000)
            .map(|_| cull_core::Instance {
                position: glam::Vec3::new(
                    rng.range(-3.0, 3.0),
                    rng.range(-2.0, 2.0),
                    -rng.range(5.0, 2000.0),
                ),
                rotation: rng.rotation(),
                scale: rng.range(0.5, 1.5),
            })
            .collect();
        let scene = Scene {
            clip_from_world: CameraKind::InfiniteReverseZ.projection()
                * glam::Mat4::look_at_rh(glam::Vec3::ZERO, -glam::Vec3::Z, glam::Vec3::Y),
            bounds: cull_core::Sphere::new(glam::Vec3::new(0.1, 0.2, 0.0), 0.8),
            instances,
        };
        let (scene, layout) = sorted(&scene, &culler);
        let frustum = scene.frustum().unwrap();
        // Thresholds from the visible instances' sizes: the farthest level
        // ends at the size of the 30% largest, so most are beyond it.
        let metric = cull_core::SizeMetric {
            origin: glam::Vec3::ZERO,
            scale: 1.0,
            perspective: true,
        };
        let bytes = culler.format().encode(&scene.instances).unwrap();
        let mut sizes: Vec<f64> = (0..scene.instances.len())
            .filter_map(|i| culler.format().world_sphere(&bytes, i, scene.bounds))
            .filter(|s| frustum.intersects_sphere(s.center, s.radius))
            .map(|s| metric.size(s.center, s.radius))
            .collect();
        sizes.sort_by(|a, b| b.total_cmp(a));
        // Each threshold in the widest gap between sizes near its quantile,
        // so that few instances are within rounding of it.
        let at = |q: f64| {
            let k = (sizes.len() as f64 * q) as usize;
            let gap = (k - 50..k + 50)
                .max_by(|&i, &j| (sizes[i] / sizes[i + 1]).total_cmp(&(sizes[j] / sizes[j + 1])))
                .unwrap();
            (sizes[gap] * sizes[gap + 1]).sqrt() as f32
        };
        let levels = frustum
            .detail_levels(metric, &[at(0.05), at(0.1), at(0.2), at(0.3)])
            .unwrap();
        let by_frustum = layout.kept_cells(&[frustum], 200_000);
        let by_size = layout.kept_cells(&levels, 200_000);
        assert!(
            by_size * 4 < by_frustum * 3,
            "{variant:?}: the cut-off culled too few cells to see: {by_size} of {by_frustum}"
        );
        let (survivors, kept) = run_cells(ctx, &culler, &scene, &layout, &levels, 200_000, 4);
        assert_views_exact(
            &format!("{variant:?} levels with a cut-off"),
            &culler,
            &scene,
            &levels,
            &survivors,
        );
        assert!(
            survivors.iter().all(|s| !s.is_empty()),
            "{variant:?}: an empty level"
        );
        assert!(
            kept.abs_diff(by_size) <= 2,
            "{variant:?}: GPU kept {kept} cells, CPU {by_size}"
        );
    }
}

/// Far from the world's origin and through a mirrored view (instances and
/// camera moved together), with levels measured from there: the cell pass's
/// slack grows with the coordinates as the instance test's does, and the
/// survivors are still the flat cull's.
#[test]
fn cells_far_from_the_origin_and_mirrored() {
    let ctx = gpu();
    for variant in cell_variants(ctx) {
        let culler = posquat_indices(ctx, variant, 4);
        for (s, (offset, mirror)) in [
            (glam::Vec3::new(1.0e5, -3.0e4, 2.0e4), false),
            (glam::Vec3::new(-3.0e4, 0.0, 4.0e4), true),
        ]
        .into_iter()
        .enumerate()
        {
            let camera = Camera::ALL[s];
            let near = Scene::random(80 + s as u64, 50_000, camera, Some(0.3));
            let mut scene = crate::occlusion::moved_scene(&near, offset, false);
            if mirror {
                // The same instances through a mirrored view (x flipped in clip space).
                scene.clip_from_world =
                    glam::Mat4::from_scale(glam::Vec3::new(-1.0, 1.0, 1.0)) * scene.clip_from_world;
            }
            let (scene, layout) = sorted(&scene, &culler);
            let frustum = scene.frustum().unwrap();
            let metric = cull_core::SizeMetric {
                origin: offset,
                scale: 1.0,
                perspective: camera != Camera::Orthographic,
            };
            let view_sets = [
                ("one view", vec![frustum]),
                (
                    "levels",
                    frustum.detail_levels(metric, &[0.2, 0.05, 0.02, 0.01]).unwrap(),
                ),
            ];
            for (name, frusta) in &view_sets {
                let what = format!("{variant:?} offset {offset} mirrored {mirror} {camera:?} {name}");
                let (survivors, kept) = run_cells(ctx, &culler, &scene, &layout, frusta, 50_000, 4);
                // The same sets as the flat cull's, and the reference's but
                // for borderline spheres (many, this far out, at the levels'
                // thresholds: see the note above).
                let flat = run_views(ctx, &culler, &scene, frusta, 50_000, 4);
                let bytes = culler.format().encode(&scene.instances).unwrap();
                for (view, (got, flat)) in survivors.iter().zip(&flat).enumerate() {
                    let sorted = |v: &Vec<u32>| {
                        let mut v = v.clone();
                        v.sort_unstable();
                        v
                    };
                    assert_eq!(
                        sorted(got),
                        sorted(flat),
                        "{what} view {view}: not the flat cull's"
                    );
                    let reference =
                        cull_core::cpu::classify(culler.format(), &bytes, scene.bounds, &frusta[view])
                            .unwrap();
                    if let Err(e) = reference.check(got) {
                        panic!("{what} view {view}: {e}");
                    }
                }
                let visible: usize = survivors.iter().map(Vec::len).sum();
                assert!(visible > 1000, "{what}: too few visible to see");
                assert!(kept < layout.cells(), "{what}: no cell culled");
            }
        }
    }
}

/// The pick between cells and the flat cull: an unsorted layout keeps every
/// cell, so it culls flat; either way the survivors are the flat cull's.
#[test]
fn the_pick_culls_flat_when_cells_cannot_help() {
    let ctx = gpu();
    let Some(&variant) = cell_variants(ctx).first() else {
        return;
    };
    let culler = posquat_indices(ctx, variant, 1);
    let scene = Scene::random(78, 50_000, CameraKind::InfiniteReverseZ, Some(0.05));
    let bytes = culler.format().encode(&scene.instances).unwrap();
    let unsorted = CellLayout {
        order: (0..50_000).collect(),
        bounds: CellLayout::bounds_of(culler.format(), &bytes, scene.bounds, culler.tile_len()).unwrap(),
        cell_len: culler.tile_len(),
    };
    let frusta = [scene.frustum().unwrap()];
    assert_eq!(unsorted.kept_cells(&frusta, 50_000), unsorted.cells());
    let job = Job::new(ctx, &culler, &scene, 50_000);
    let cells = CellIndex::new(&ctx.device, &culler, 50_000).unwrap();
    cells.write_bounds(&ctx.queue, 0, &unsorted.bounds).unwrap();
    let request = CullRequest::new(&job.input, &job.target, &frusta, scene.bounds, 50_000)
        .by_cells_if_faster(&unsorted, &cells);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let pick = culler
        .cull(&mut encoder, &ctx.queue, request)
        .unwrap()
        .cell_pick
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    assert_eq!(
        pick,
        cull_core::CellPick {
            kept: unsorted.cells(),
            by_cells: false
        },
        "an unsorted layout should cull flat"
    );
    let survivors = read_views(ctx, &culler, &job.bytes, &job.target, 1, 50_000);
    assert_views_exact("the pick, unsorted", &culler, &scene, &frusta, &survivors);

    // Sorted, with no minimum left unread: by cells, and the kept count
    // (the cell pass's, or the CPU's listing's, which tests with twice the
    // slack) within rounding of the mirror's.
    let (sorted_scene, layout) = sorted(&scene, &culler);
    let job = Job::new(ctx, &culler, &sorted_scene, 50_000);
    let mut cells = CellIndex::new(&ctx.device, &culler, 50_000).unwrap();
    cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
    // A new index, or one set back, has a threshold per way of culling by
    // cells; one set has the same for both.
    let defaults = (CELLS_MIN_SKIPPED_BYTES, LISTED_CELLS_MIN_SKIPPED_BYTES);
    let thresholds = |c: &CellIndex| (c.min_skipped_bytes(), c.listed_min_skipped_bytes());
    assert_eq!(thresholds(&cells), defaults);
    cells.set_min_skipped_bytes(0);
    assert_eq!(thresholds(&cells), (0, 0));
    cells.reset_min_skipped_bytes();
    assert_eq!(thresholds(&cells), defaults);
    cells.set_min_skipped_bytes(0);
    let request = CullRequest::new(&job.input, &job.target, &frusta, scene.bounds, 50_000)
        .by_cells_if_faster(&layout, &cells);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let pick = culler
        .cull(&mut encoder, &ctx.queue, request)
        .unwrap()
        .cell_pick
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    assert!(pick.by_cells && pick.kept < layout.cells(), "{pick:?}");
    let kept = cells.read_kept(&ctx.device, &ctx.queue).unwrap();
    assert!(kept.abs_diff(pick.kept) <= 2, "GPU kept {kept}, {pick:?}");
    let survivors = read_views(ctx, &culler, &job.bytes, &job.target, 1, 50_000);
    assert_views_exact("the pick, sorted", &culler, &sorted_scene, &frusta, &survivors);
}

/// Small limits: several chunks (each with its own kept cells and indirect
/// dispatch) and a dispatch that wraps into y.
#[test]
fn cells_across_chunks_and_two_dimensional_dispatch() {
    let ctx = gpu();
    let limits = Tuning {
        max_binding_size: Some(128 << 10),
        max_workgroups_per_dimension: Some(7),
        ..Default::default()
    };
    for variant in cell_variants(ctx) {
        for format in InstanceFormat::ALL {
            let culler = views_culler(ctx, variant, format, OutputKind::Instances, limits, 2);
            let chunk = culler.chunk_len() as usize;
            // Two chunks; two views of them fill three output windows.
            let size = chunk + chunk / 3;
            let scene = edge_scene(size as u64, size, Camera::Perspective, format);
            let (scene, layout) = sorted(&scene, &culler);
            let frusta = view_frusta(&scene, 5, 2);
            let (survivors, _) = run_cells(ctx, &culler, &scene, &layout, &frusta, size as u32, 2);
            let what = format!("{variant:?} {format:?} n={size} chunk={chunk}");
            assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
        }
    }
}

/// What cannot cull by cells says so: a count past the cells, another
/// culler's cells, too many cells' bounds.
#[test]
fn cells_refuse_bad_input() {
    let ctx = gpu();
    let format = InstanceFormat::PosQuat;
    let Some(&variant) = cell_variants(ctx).first() else {
        return;
    };
    let culler = culler(ctx, variant, format, OutputKind::Indices, Tuning::default());
    let other = self::culler(ctx, variant, format, OutputKind::Indices, Tuning::default());
    let scene = edge_scene(3, 3000, Camera::Perspective, format);
    let job = Job::new(ctx, &culler, &scene, 3000);
    let small = CellIndex::new(&ctx.device, &culler, 1000).unwrap();
    assert!(
        small
            .write_bounds(
                &ctx.queue,
                0,
                &vec![
                    cull_core::CellBounds {
                        sphere: [0.0; 4],
                        largest_radius: 0.0,
                        holds_culled: false,
                    };
                    small.cells() as usize + 1
                ]
            )
            .is_err()
    );
    let foreign = CellIndex::new(&ctx.device, &other, 3000).unwrap();
    let frusta = [scene.frustum().unwrap()];
    let request = || CullRequest::new(&job.input, &job.target, &frusta, scene.bounds, 3000);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    assert!(matches!(
        culler.cull(&mut encoder, &ctx.queue, request().by_cells(&small)),
        Err(CullError::CountExceedsCapacity { .. })
    ));
    assert!(matches!(
        culler.cull(&mut encoder, &ctx.queue, request().by_cells(&foreign)),
        Err(CullError::InvalidParameter(_))
    ));
    // A layout of cells other than the index's (another tile length): the
    // pick and the CPU's list would name the wrong instances.
    let bytes = format.encode(&scene.instances).unwrap();
    let halves = CellLayout {
        order: Vec::new(),
        bounds: CellLayout::bounds_of(format, &bytes, scene.bounds, culler.tile_len() / 2).unwrap(),
        cell_len: culler.tile_len() / 2,
    };
    let mut index = CellIndex::new(&ctx.device, &culler, 3000).unwrap();
    index.set_min_skipped_bytes(0);
    assert!(matches!(
        culler.cull(
            &mut encoder,
            &ctx.queue,
            request().by_cells_if_faster(&halves, &index)
        ),
        Err(CullError::InvalidParameter(_))
    ));
}

/// `Ordered` by cells walks only the kept cells' tiles, each workgroup
/// finding its own in the cell pass's bits: with tiny tiles, so hundreds of
/// cells (a word of bits or none per thread of the search) and thousands
/// (several words per thread, the last thread's run cut short), most
/// culled, and the look-back's fallback forced (silent chain positions, no
/// waiting), in both of its forms, one view and three, each view exact and
/// in order.
#[cfg(feature = "ordered")]
#[test]
fn ordered_by_cells_with_forced_fallback() {
    let ctx = gpu();
    let forms = ordered_forms(ctx);
    assert!(
        !forms.is_empty(),
        "Ordered is compiled in every build that runs this test"
    );
    for form in forms {
        for tuning in forced_fallback_tunings(form) {
            let culler = views_culler(
                ctx,
                ScanVariant::Ordered,
                InstanceFormat::PosQuat,
                OutputKind::Indices,
                tuning,
                3,
            );
            for n in [50_001u32, 300_001] {
                let scene = edge_scene(
                    2024,
                    n as usize,
                    CameraKind::InfiniteReverseZ,
                    InstanceFormat::PosQuat,
                );
                let (scene, layout) = sorted(&scene, &culler);
                let frustum = scene.frustum().unwrap();
                for frusta in [vec![frustum], view_frusta(&scene, 23, 3)] {
                    let what = format!(
                        "{} spin {:?} silent {:#b} n {n} views {}",
                        form_name(&culler),
                        tuning.lookback_spin_limit,
                        tuning.lookback_silent_tiles,
                        frusta.len()
                    );
                    let (survivors, kept) = run_cells(ctx, &culler, &scene, &layout, &frusta, n, 3);
                    assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
                    assert!(
                        kept + 50 <= layout.cells(),
                        "{what}: kept {kept} of {} cells: the chain would skip few",
                        layout.cells()
                    );
                }
            }
        }
    }
}

/// `OrderedTwoPass` by cells, in both of its forms: tiles of 128 (several
/// super-tiles of counts), most cells culled (their tiles unvisited must
/// count zero), chunks (small bindings) and a two-dimensional dispatch with
/// surplus workgroups, one view and three in a target of four views; each
/// view exact and in the sorted batch's order.
#[cfg(feature = "ordered-two-pass")]
#[test]
fn ordered_two_pass_by_cells_across_chunks() {
    let ctx = gpu();
    for form in two_pass_forms(ctx) {
        for max_binding_size in [None, Some(64 << 10)] {
            let tuning = Tuning {
                workgroup_size: Some(32),
                max_workgroups_per_dimension: Some(5),
                max_binding_size,
                ..form
            };
            let culler = views_culler(
                ctx,
                ScanVariant::OrderedTwoPass,
                InstanceFormat::PosQuat,
                OutputKind::Indices,
                tuning,
                4,
            );
            // With chunks, the four views' lists must fit four bindings.
            let n = if max_binding_size.is_some() {
                culler.chunk_len() - 3
            } else {
                100_003
            };
            let scene = edge_scene(
                2026,
                n as usize,
                CameraKind::InfiniteReverseZ,
                InstanceFormat::PosQuat,
            );
            let (scene, layout) = sorted(&scene, &culler);
            let frustum = scene.frustum().unwrap();
            // One target for every cull: three views (the first turned away
            // from the camera), then the camera alone, then three again, so
            // that tiles kept in one cull and culled in the next hold stale
            // bits of view 0, which must not be gathered.
            let job = Job::new(ctx, &culler, &scene, n);
            let target = CullTarget::with_views(&ctx.device, &culler, n, 4).unwrap();
            let cells = CellIndex::new(&ctx.device, &culler, n).unwrap();
            cells.write_bounds(&ctx.queue, 0, &layout.bounds).unwrap();
            let mut three = view_frusta(&scene, 29, 3);
            three.rotate_left(1);
            for (round, frusta) in [three.clone(), vec![frustum], three].into_iter().enumerate() {
                let what = format!(
                    "{} n {n} chunk {} views {} round {round}",
                    form_name(&culler),
                    culler.chunk_len(),
                    frusta.len()
                );
                let (survivors, kept) =
                    cull_cells_again(ctx, &culler, &scene, &job, &target, &cells, &frusta);
                assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
                assert!(kept < layout.cells(), "{what}: every cell kept");
            }
        }
    }
}
