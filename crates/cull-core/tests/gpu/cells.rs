//! Cell culling (`cull_core::cells`): a batch sorted into cells and culled
//! with `Culler::cull_views_in_cells` keeps exactly what the flat cull
//! keeps, in every variant that culls cells, format, output kind, size,
//! view set (one view, several, one camera's levels of detail), across
//! chunks and two-dimensional dispatches; and the cell pass does cull
//! cells, so the test cannot pass by reading everything.

use crate::harness::*;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CellIndex, CellLayout, CullError, CullTarget, CullViewsParams, Culler, Frustum, InstanceFormat,
    OutputKind, ScanVariant, Tuning,
};

const SIZES: [usize; 5] = [0, 1, 257, 4099, 100_003];

/// The variants that cull cells, available here. A build whose variants
/// cannot (only `Ordered` or `HillisSteele` compiled in) gets none; it
/// checks instead that each of its variants refuses cells with a typed
/// error, and says so.
fn cell_variants(ctx: &cull_core::GpuContext) -> Vec<ScanVariant> {
    let (cells, others): (Vec<ScanVariant>, Vec<ScanVariant>) = variants(ctx).into_iter().partition(|&v| {
        views_culler(
            ctx,
            v,
            InstanceFormat::PosQuat,
            OutputKind::Indices,
            Tuning::default(),
            1,
        )
        .culls_cells()
    });
    if cells.is_empty() {
        for variant in others {
            let culler = views_culler(
                ctx,
                variant,
                InstanceFormat::PosQuat,
                OutputKind::Indices,
                Tuning::default(),
                1,
            );
            assert!(matches!(
                CellIndex::new(&ctx.device, &culler, 100),
                Err(CullError::InvalidParameter(_))
            ));
        }
        eprintln!("no compiled-in variant culls by cells: checked that the others refuse");
    }
    cells
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
    let cells = CellIndex::new(&ctx.device, culler, capacity).unwrap();
    cells.write_spheres(&ctx.queue, 0, &layout.spheres).unwrap();
    let params = CullViewsParams {
        frusta,
        local_bounds: scene.bounds,
        count: scene.instances.len() as u32,
    };
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler
        .cull_views_in_cells(&mut encoder, &ctx.queue, &job.input, &target, &params, &cells)
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    let survivors = read_views(ctx, culler, &job.bytes, &target, frusta.len(), params.count);
    (survivors, cells.read_kept(&ctx.device, &ctx.queue).unwrap())
}

fn check(output: OutputKind) {
    let ctx = gpu();
    let mut culled_cells = 0;
    for variant in cell_variants(ctx) {
        for format in InstanceFormat::ALL {
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
        let culler = views_culler(
            ctx,
            variant,
            InstanceFormat::PosQuat,
            OutputKind::Indices,
            Tuning::default(),
            1,
        );
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

/// The pick between cells and the flat cull: an unsorted layout keeps every
/// cell, so it culls flat; either way the survivors are the flat cull's.
#[test]
fn the_pick_culls_flat_when_cells_cannot_help() {
    let ctx = gpu();
    let Some(&variant) = cell_variants(ctx).first() else {
        return;
    };
    let culler = views_culler(
        ctx,
        variant,
        InstanceFormat::PosQuat,
        OutputKind::Indices,
        Tuning::default(),
        1,
    );
    let scene = Scene::random(78, 50_000, CameraKind::InfiniteReverseZ, Some(0.05));
    let bytes = culler.format().encode(&scene.instances).unwrap();
    let unsorted = CellLayout {
        order: (0..50_000).collect(),
        spheres: CellLayout::spheres_of(culler.format(), &bytes, scene.bounds, culler.tile_len()).unwrap(),
        cell_len: culler.tile_len(),
    };
    let frusta = [scene.frustum().unwrap()];
    assert_eq!(unsorted.kept_cells(&frusta, 50_000), unsorted.cells());
    let job = Job::new(ctx, &culler, &scene, 50_000);
    let cells = CellIndex::new(&ctx.device, &culler, 50_000).unwrap();
    cells.write_spheres(&ctx.queue, 0, &unsorted.spheres).unwrap();
    let params = CullViewsParams {
        frusta: &frusta,
        local_bounds: scene.bounds,
        count: 50_000,
    };
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let by_cells = culler
        .cull_views_by_cells_if_faster(
            &mut encoder,
            &ctx.queue,
            &job.input,
            &job.target,
            &params,
            &unsorted,
            &cells,
        )
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
    assert!(!by_cells, "an unsorted layout should cull flat");
    let survivors = read_views(ctx, &culler, &job.bytes, &job.target, 1, 50_000);
    assert_views_exact("the pick, unsorted", &culler, &scene, &frusta, &survivors);
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

/// What cannot cull by cells says so: an order-preserving variant, a count
/// past the cells, another culler's cells, too many spheres.
#[test]
fn cells_refuse_bad_input() {
    let ctx = gpu();
    let format = InstanceFormat::PosQuat;
    for variant in variants(ctx).into_iter().filter(|v| v.preserves_order()) {
        let culler = culler(ctx, variant, format, OutputKind::Indices, Tuning::default());
        assert!(!culler.culls_cells());
        assert!(matches!(
            CellIndex::new(&ctx.device, &culler, 100),
            Err(CullError::InvalidParameter(_))
        ));
    }
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
            .write_spheres(&ctx.queue, 0, &vec![[0.0; 4]; small.cells() as usize + 1])
            .is_err()
    );
    let foreign = CellIndex::new(&ctx.device, &other, 3000).unwrap();
    let frusta = [scene.frustum().unwrap()];
    let params = CullViewsParams {
        frusta: &frusta,
        local_bounds: scene.bounds,
        count: 3000,
    };
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    assert!(matches!(
        culler.cull_views_in_cells(&mut encoder, &ctx.queue, &job.input, &job.target, &params, &small),
        Err(CullError::CountExceedsCapacity { .. })
    ));
    assert!(matches!(
        culler.cull_views_in_cells(
            &mut encoder,
            &ctx.queue,
            &job.input,
            &job.target,
            &params,
            &foreign
        ),
        Err(CullError::InvalidParameter(_))
    ));
}
