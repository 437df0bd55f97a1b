//! `GpuCullCells`: a batch sorted into cells is culled by cells with the
//! flat cull's counts, through edits and a resized list.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

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
    if !GpuCullScanVariant::Ordered.is_compiled() {
        eprintln!("Ordered is not compiled in: nothing to check");
        return;
    }
    cells_case(Some(GpuCullScanVariant::Ordered));
}

fn cells_case(variant: Option<GpuCullScanVariant>) {
    let mut h = harness_with(variant, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    // A field of 200 × 200 spheres, 2 apart, around the camera: half of it
    // behind the camera, much of the rest beside its view.
    let field: Vec<GpuCullInstance> = (0..40_000)
        .map(|i| {
            let (x, z) = ((i % 200) as f32, (i / 200) as f32);
            GpuCullInstance::new(
                Vec3::new(x * 2.0 - 200.0, 0.0, 200.0 - z * 2.0),
                LinearRgba::rgb(1.0, 0.2, 0.1),
            )
        })
        .collect();
    h.app.world_mut().entity_mut(h.batch).insert((
        GpuCullInstances::new(field),
        GpuCullCells {
            min_skipped_bytes: Some(0),
        },
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
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .set(
            0,
            GpuCullInstance::new(Vec3::new(0.0, 0.0, -4.0), LinearRgba::rgb(1.0, 0.2, 0.1)),
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
        let mut list = h.app.world_mut().get_mut::<GpuCullInstances>(h.batch).unwrap();
        for i in (1000..4000).step_by(3) {
            let (x, z) = ((i % 40) as f32, (i / 40) as f32);
            list.set(
                i,
                GpuCullInstance::new(
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
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .push(GpuCullInstance::new(
            Vec3::new(1.0, 0.0, -5.0),
            LinearRgba::rgb(1.0, 0.2, 0.1),
        ));
    run_until_counts_match(&mut h, "a pushed instance");
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}
