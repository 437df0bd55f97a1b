//! Counts against the CPU reference: every variant, several cameras,
//! edits and what they upload, settings switches, edits through reflection,
//! render layers, `Packed16`'s scale, views without a frustum, draw-argument
//! writes, and the stats of hidden and despawned batches.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// An edit Bevy sees but the component's methods did not record (through
/// reflection, as an inspector or a scene makes one) uploads the whole
/// list: the counts follow it.
#[test]
fn an_edit_through_reflection_is_uploaded() {
    use bevy::reflect::GetPath;
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let before = run_until_counts_match(&mut h, "before the edit");
    assert!(before.iter().all(|&c| c > 0), "{before:?}");
    let uploaded = h.app.world().resource::<GpuCullStats>().uploaded_instances;
    let mut batch = h.app.world_mut().get_mut::<GpuCullInstances>(h.batch).unwrap();
    // Half the instances lifted far above the view.
    for i in (0..batch.len()).step_by(2) {
        let position = batch
            .path_mut::<Vec3>(format!("instances[{i}].position").as_str())
            .expect("a reflected instance position");
        position.y += 1000.0;
    }
    let after = run_until_counts_match(&mut h, "after an edit through reflection");
    assert_ne!(before, after, "the edit changed no count");
    let stats = h.app.world().resource::<GpuCullStats>();
    assert!(stats.uploaded_instances > uploaded, "nothing was uploaded");
}

#[test]
fn counts_match_reference_and_pixels_show_instances() {
    let variants: Vec<Option<GpuCullScanVariant>> = std::iter::once(None)
        .chain(GpuCullScanVariant::compiled().map(Some))
        .collect();
    for variant in variants {
        let mut h = harness(variant, &[looking_down_grid()]);
        let expected = run_until_counts_match(&mut h, &format!("{variant:?}"));
        assert!(
            expected[0] > 20 && expected[0] < 1600,
            "the camera sees part of the grid: {expected:?}"
        );
        assert_renders(&mut h, &format!("{variant:?}"));
        // The frames that showed instances were drawn by the plugin, which
        // reports it from the render world a frame or two later.
        let drawn = |h: &Harness| h.app.world().resource::<GpuCullStats>().drawn_frames;
        for _ in 0..5 {
            if drawn(&h) > 0 {
                break;
            }
            h.app.update();
        }
        assert!(
            drawn(&h) > 0,
            "{variant:?}: instances on screen, but drawn_frames = 0"
        );
        // The grid's mesh is a sphere centred on its origin and the default
        // format rotates centers, and Bevy's perspective camera has five
        // planes: the plugin compiles the kernels without the rotation and
        // for plain views after the general one, and the counts stay the
        // reference's once it culls with the form that has both.
        let centred = |h: &Harness| {
            let kernels = &h.app.world().resource::<GpuCullStats>().kernels;
            let has = |centred: bool, plain: bool| {
                kernels.iter().any(|(_, spec)| {
                    spec.centred == centred
                        && spec.plain_views == plain
                        && spec.views == 1
                        && spec.test == cull_core::VisibilityTest::Frustum
                })
            };
            has(true, false) && has(false, true) && has(true, true)
        };
        for _ in 0..300 {
            if centred(&h) {
                break;
            }
            h.app.update();
        }
        let kernels = h.app.world().resource::<GpuCullStats>().kernels.clone();
        assert!(
            centred(&h),
            "{variant:?}: not every form for a centred mesh and plain views: {kernels:?}"
        );
        let general = kernels
            .iter()
            .position(|(_, s)| !s.centred && !s.plain_views)
            .unwrap();
        let faster = kernels
            .iter()
            .position(|(_, s)| s.centred || s.plain_views)
            .unwrap();
        assert!(
            general < faster,
            "{variant:?}: a faster form came before the general kernel: {kernels:?}"
        );
        run_until_counts_match(&mut h, &format!("{variant:?}, centred kernel"));
    }
}

#[test]
fn several_cameras_edits_and_empty_batches() {
    let near = looking_down_grid();
    let far_left = Transform::from_xyz(-30.0, 3.0, 5.0).looking_at(Vec3::new(-40.0, 0.0, -20.0), Vec3::Y);
    let mut h = harness(None, &[near, far_left]);
    let counts = run_until_counts_match(&mut h, "two cameras");
    assert_ne!(counts[0], counts[1], "different frusta see different instances");
    // Shrink the batch: counts follow.
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .truncate(700);
    let shrunk = run_until_counts_match(&mut h, "after shrinking");
    assert!(shrunk[0] <= counts[0]);
    // Grow it past its capacity: buffers are replaced.
    let more: Vec<GpuCullInstance> = (0..5000)
        .map(|i| {
            GpuCullInstance::new(
                Vec3::new((i % 50) as f32 - 25.0, 0.0, -((i / 50) as f32)),
                LinearRgba::WHITE,
            )
        })
        .collect();
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .replace(more);
    run_until_counts_match(&mut h, "after growing");
    // Empty: nothing visible, no error.
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .clear();
    let empty = run_until_counts_match(&mut h, "empty batch");
    assert_eq!(empty, vec![0, 0]);
    // A batch culled (here: emptied) to nothing is drawn with zero
    // instances: such frames are not counted as drawn.
    for _ in 0..3 {
        h.app.update();
    }
    let drawn = h.app.world().resource::<GpuCullStats>().drawn_frames;
    for _ in 0..5 {
        h.app.update();
    }
    assert_eq!(
        h.app.world().resource::<GpuCullStats>().drawn_frames,
        drawn,
        "frames drawing an empty batch counted as drawn"
    );
    // No pass timings unless asked for.
    assert_eq!(h.app.world().resource::<GpuCullStats>().gpu_time_ms, None);
    // Switching the variant at run time takes effect, and so do timings.
    let target = GpuCullScanVariant::compiled().last().unwrap();
    let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
    settings.variant = Some(target);
    settings.pass_timings = true;
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .replace(
            (0..300)
                .map(|i| GpuCullInstance::new(Vec3::new(i as f32 * 0.3 - 45.0, 0.0, -5.0), LinearRgba::WHITE))
                .collect(),
        );
    // The previous culler keeps culling until the new kernels are compiled.
    let start = std::time::Instant::now();
    while h.app.world().resource::<GpuCullStats>().variant != Some(target) && start.elapsed() < SETTLE {
        h.app.update();
    }
    run_until_counts_match(&mut h, "after switching variant");
    for _ in 0..3 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.variant, Some(target));
    // Timestamps (lavapipe has them), asked for, arrive without blocking
    // the frame.
    assert!(
        stats.gpu_time_ms.is_some_and(|ms| ms > 0.0),
        "no GPU time: {:?}",
        stats.gpu_time_ms
    );
    assert!(!stats.timings.is_empty());
    // Turned off again: no time stays behind.
    h.app.world_mut().resource_mut::<GpuCullSettings>().pass_timings = false;
    for _ in 0..3 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.gpu_time_ms, None);
    assert!(stats.timings.is_empty());
}

/// Issue 15: switching the variant and format never stalls a frame. The
/// new kernels compile in Bevy's `PipelineCache` while the previous culler
/// keeps culling: frames after the switch are still culled by the old
/// variant, no render frame goes unculled, and the new one takes over.
#[test]
fn switching_settings_keeps_culling_while_kernels_compile() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    run_until_counts_match(&mut h, "before the switch");
    let stats = h.app.world().resource::<GpuCullStats>();
    let before = stats.variant.expect("culled");
    let (culled0, frame0) = (stats.culled_frames, stats.render_frame);
    let target = GpuCullScanVariant::compiled()
        .filter(|v| *v != before)
        .last()
        .expect("at least two variants are compiled in for this test");
    {
        let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
        settings.variant = Some(target);
        settings.format = GpuCullInstanceFormat::Matrix;
    }
    let mut seen = Vec::new();
    let start = std::time::Instant::now();
    while start.elapsed() < SETTLE {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        seen.push((stats.render_frame, stats.variant));
        if stats.variant == Some(target) {
            break;
        }
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    eprintln!("switch from {before:?} (frame {frame0}) to {target:?}: {seen:?}");
    assert_eq!(
        stats.variant,
        Some(target),
        "the new culler never took over: {seen:?}"
    );
    // The switch is extracted two render frames after frame0 at the latest
    // (one still in flight when it was made); a frame culled by the old
    // variant after that shows the old culler kept culling.
    assert!(
        seen.iter()
            .any(|&(frame, variant)| frame >= frame0 + 2 && variant == Some(before)),
        "the old culler stopped at the switch: {seen:?}"
    );
    assert_eq!(
        stats.culled_frames - culled0,
        stats.render_frame - frame0,
        "a render frame went unculled during the switch: {seen:?}"
    );
    run_until_counts_match(&mut h, "after the switch");
}

/// Issue 16: a batch on another render layer is neither culled nor drawn by
/// a camera that does not see that layer, as with Bevy's meshes.
#[test]
fn render_layers_hide_a_batch_from_other_cameras() {
    // Camera 0 on layer 0 (it is read back), camera 1 on layer 1, both on
    // the grid: Bevy extracts the batch because camera 1 sees it.
    let mut h = harness(None, &[looking_down_grid(), looking_down_grid()]);
    run_until_counts_match(&mut h, "before moving the batch to layer 1");
    let layer_one = bevy::camera::visibility::RenderLayers::layer(1);
    h.app
        .world_mut()
        .entity_mut(h.cameras[1])
        .insert(layer_one.clone());
    h.app.world_mut().entity_mut(h.batch).insert(layer_one);
    // Counts culled before the change may still arrive: wait for counts
    // culled after it (camera 1 keeps culling), forget, and wait again.
    let settle_after = |h: &mut Harness| {
        let changed_at = h.app.world().resource::<GpuCullStats>().render_frame;
        let start = std::time::Instant::now();
        while h.app.world().resource::<GpuCullStats>().counts_frame <= changed_at + 2
            && start.elapsed() < SETTLE
        {
            h.app.update();
        }
    };
    settle_after(&mut h);
    h.app.world_mut().resource_mut::<GpuCullStats>().visible.clear();
    settle_after(&mut h);
    let padded = h.pixels.lock().unwrap().clone().expect("a frame was read back");
    let covered = count_pixels(&padded, 0..HEIGHT as usize, |p| p[0] as u32 > p[2] as u32 + 30);
    let stats = h.app.world().resource::<GpuCullStats>();
    assert!(
        !stats.visible.contains_key(&(h.cameras[0], h.batch)),
        "a layer-0 camera still culls a layer-1 batch"
    );
    assert!(
        stats
            .visible
            .get(&(h.cameras[1], h.batch))
            .is_some_and(|&n| n > 0),
        "the layer-1 camera stopped culling the batch: {:?}",
        stats.visible
    );
    assert_eq!(covered, 0, "a layer-0 camera still draws a layer-1 batch");
}

/// Edits upload only the instances they touch, and the counts follow them.
#[test]
fn edits_upload_only_what_changed() {
    let mut h = harness(None, &[looking_down_grid()]);
    let before = run_until_counts_match(&mut h, "initial")[0];
    let uploaded = |h: &Harness| h.app.world().resource::<GpuCullStats>().uploaded_instances;
    assert_eq!(uploaded(&h), 1600, "the new batch goes up whole, once");
    // Move an instance that is out of view in front of the camera.
    let hidden = {
        let camera = h.cameras[0];
        let world = h.app.world_mut();
        let frustum = camera_frustum(world, camera);
        let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
        let batch = world.get::<GpuCullInstances>(h.batch).unwrap();
        let visible = batch
            .visible_on_cpu(bounds, &frustum, GpuCullInstanceFormat::PosQuat)
            .unwrap();
        (0..batch.len() as u32)
            .find(|i| !visible.contains(i))
            .expect("the camera does not see the whole grid") as usize
    };
    let mut batch = h.app.world_mut().get_mut::<GpuCullInstances>(h.batch).unwrap();
    let mut moved = batch.instances()[hidden];
    moved.position = Vec3::new(0.0, 0.0, 2.0);
    batch.set(hidden, moved);
    let after = run_until_counts_match(&mut h, "after moving one instance")[0];
    assert_eq!(after, before + 1, "the moved instance is now visible");
    assert_eq!(uploaded(&h), 1601, "one instance uploaded");
    // Edit a range in place, then append within the capacity (2048).
    for instance in h
        .app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .edit(100..110)
    {
        instance.position.y += 50.0; // lifted out of view
    }
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .extend((0..3).map(|i| GpuCullInstance::new(Vec3::new(i as f32, 1.0, 0.0), LinearRgba::WHITE)));
    run_until_counts_match(&mut h, "after editing and appending");
    assert_eq!(uploaded(&h), 1601 + 10 + 3);
    // Frames with no edits upload nothing.
    for _ in 0..5 {
        h.app.update();
    }
    assert_eq!(uploaded(&h), 1614);
}

/// Issue 14, item 3: `Packed16` stores no scale, yet the draw scales each
/// instance. Spheres drawn at scale 3 whose centers lie just outside the
/// view's left edge poke into it: the cull must keep them (an unscaled cull
/// drops every one), the count must equal the CPU reference for the scaled
/// spheres, and the pixels at the left edge must show them.
#[test]
fn packed16_culls_scaled_instances_like_the_draw() {
    let camera = Transform::from_xyz(0.0, 0.0, 0.0).looking_at(Vec3::NEG_Z, Vec3::Y);
    let mut h = harness(None, &[camera]);
    h.app.world_mut().resource_mut::<GpuCullSettings>().format = GpuCullInstanceFormat::Packed16;
    // Frames until the camera has its projection and the batch its bounds.
    for _ in 0..10 {
        h.app.update();
        if h.app.world().get::<GpuCullBounds>(h.batch).is_some() {
            break;
        }
    }
    let frustum = camera_frustum(h.app.world_mut(), h.cameras[0]);
    let left = frustum.planes()[0];
    let (normal, d) = (left.truncate(), left.w);
    let radius = h
        .app
        .world()
        .get::<GpuCullBounds>(h.batch)
        .expect("bounds computed")
        .radius;
    // Centers 1.2 radii outside the left plane: the unit sphere misses the
    // view, the sphere at scale 3 reaches 1.8 radii into it.
    let edge: Vec<GpuCullInstance> = (0..12)
        .map(|k| {
            let on_axis = Vec3::new(0.0, (k as f32 - 5.5) * 0.3, -6.0 - k as f32 * 0.25);
            let on_plane = on_axis - normal * (normal.dot(on_axis) + d);
            let mut i =
                GpuCullInstance::new(on_plane - normal * 1.2 * radius, LinearRgba::rgb(1.0, 0.2, 0.1));
            i.scale = 3.0;
            i
        })
        .collect();
    let unscaled_visible = edge
        .iter()
        .filter(|i| frustum.intersects_sphere(i.position, radius))
        .count();
    assert_eq!(unscaled_visible, 0, "the test places every unit sphere outside");
    h.app
        .world_mut()
        .get_mut::<GpuCullInstances>(h.batch)
        .unwrap()
        .replace(edge.clone());
    let counts = run_until_counts_match(&mut h, "packed16 at scale 3");
    assert_eq!(counts, vec![12], "every scaled sphere reaches into the view");
    // The left pixel columns show instances.
    let hgt = HEIGHT as usize;
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let edge_pixels = render_until_pixels(&mut h, 0..2, is_instance, hgt / 4);
    assert!(
        edge_pixels > hgt / 4,
        "only {edge_pixels} pixels of the left edge show the scaled instances"
    );
    // Sorted into cells: the cells' bounds cover the scaled spheres too
    // (computed with the cull's bounds, not the mesh's). The twelve at one
    // place, so that their cell is no larger than one of them.
    let (camera, batch) = (h.cameras[0], h.batch);
    let cluster = vec![edge[5]; 12];
    h.app.world_mut().entity_mut(batch).insert((
        GpuCullInstances::new(cluster),
        GpuCullCells {
            min_skipped_bytes: Some(0),
        },
    ));
    let start = std::time::Instant::now();
    while !h
        .app
        .world()
        .resource::<GpuCullStats>()
        .cells
        .get(&(camera, batch))
        .is_some_and(|c| c.by_cells)
    {
        assert!(start.elapsed() < SETTLE, "never culled by cells");
        h.app.update();
    }
    let counts = run_until_counts_match(&mut h, "packed16 at scale 3, by cells");
    assert_eq!(
        counts,
        vec![12],
        "by cells, every scaled sphere reaches into the view"
    );
}

/// Frames that change nothing write no draw arguments (issue 15: they were
/// written for every view and batch every frame); a new camera writes its own.
#[test]
fn unchanged_frames_write_no_draw_arguments() {
    let mut h = harness(None, &[looking_down_grid()]);
    run_until_counts_match(&mut h, "start");
    // Bevy's diagnostic: the writes since the previous culled frame, one
    // measurement per culled frame.
    let writes = |h: &Harness| -> Vec<f64> {
        let store = h.app.world().resource::<bevy::diagnostic::DiagnosticsStore>();
        let diagnostic = store.get(&GpuCullPlugin::DRAW_ARGS_WRITES).expect("registered");
        diagnostic.values().copied().collect()
    };
    let before: f64 = writes(&h).iter().sum();
    assert!(before >= 1.0, "the target's arguments were written once");
    for _ in 0..20 {
        h.app.update();
    }
    // Every frame culls: the latest ten measurements are of those frames.
    let after = writes(&h);
    let latest = &after[after.len().saturating_sub(10)..];
    assert!(
        latest.len() == 10 && latest.iter().all(|&w| w == 0.0),
        "unchanged frames wrote draw arguments: {after:?}"
    );
}

/// A view whose matrices give no frustum (here a NaN override) is culled
/// with one that keeps everything: every instance is counted and drawn,
/// never last frame's survivors.
#[test]
fn a_view_without_a_frustum_draws_everything() {
    let mut h = harness(None, &[looking_down_grid()]);
    run_until_counts_match(&mut h, "before");
    h.app
        .world_mut()
        .entity_mut(h.cameras[0])
        .insert(GpuCullFrustumOverride {
            clip_from_world: Mat4::NAN,
        });
    let total = h.app.world().get::<GpuCullInstances>(h.batch).unwrap().len() as u32;
    let mut count = None;
    for _ in 0..60 {
        h.app.update();
        count = h
            .app
            .world()
            .resource::<GpuCullStats>()
            .visible
            .get(&(h.cameras[0], h.batch))
            .copied();
        if count == Some(total) {
            break;
        }
    }
    assert_eq!(count, Some(total), "every instance kept");
}

/// Runs frames until `done` holds for the stats, or fails with `what`.
fn run_until_stats(h: &mut Harness, what: &str, done: impl Fn(&GpuCullStats) -> bool) {
    let start = std::time::Instant::now();
    while start.elapsed() < SETTLE {
        h.app.update();
        if done(h.app.world().resource::<GpuCullStats>()) {
            return;
        }
    }
    panic!("{what}: {:?}", h.app.world().resource::<GpuCullStats>().visible);
}

/// The latest value of the plugin's visible-instances diagnostic.
fn visible_diagnostic(h: &Harness) -> Option<f64> {
    let store = h.app.world().resource::<bevy::diagnostic::DiagnosticsStore>();
    store.get(&GpuCullPlugin::VISIBLE).and_then(|d| d.value())
}

/// The stats tell the truth: a hidden batch is neither culled nor drawn and
/// has no counts (0 through the accessors); shown again it is culled and
/// counted as before; a despawned batch leaves nothing in the stats nor in
/// the visible-instances diagnostic.
#[test]
fn stats_hold_only_live_visible_batches() {
    let mut h = harness(None, &[looking_down_grid()]);
    let (camera, batch) = (h.cameras[0], h.batch);
    let counts = run_until_counts_match(&mut h, "before hiding");
    assert!(counts[0] > 0);
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.visible_for(camera, batch), counts[0]);
    assert_eq!(stats.visible_in(batch), counts[0]);

    h.app.world_mut().entity_mut(batch).insert(Visibility::Hidden);
    run_until_stats(&mut h, "hidden batch still counted", |s| {
        s.visible.is_empty() && s.shadow_visible.is_empty()
    });
    // Nothing else is culled: no render frame culls any more.
    let culled = h.app.world().resource::<GpuCullStats>().culled_frames;
    for _ in 0..8 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    assert_eq!(stats.culled_frames, culled, "a hidden batch is still culled");
    assert!(
        stats.visible.is_empty() && stats.timings.is_empty(),
        "{:?}",
        stats.visible
    );
    assert_eq!(
        (stats.visible_for(camera, batch), stats.visible_in(batch)),
        (0, 0)
    );
    assert_eq!(visible_diagnostic(&h), Some(0.0));
    let padded = h.pixels.lock().unwrap().clone().expect("a frame was read back");
    let shown = count_pixels(&padded, 0..HEIGHT as usize, |p| p[0] as u32 > p[2] as u32 + 30);
    assert_eq!(shown, 0, "a hidden batch is drawn");

    h.app.world_mut().entity_mut(batch).insert(Visibility::Inherited);
    assert_eq!(run_until_counts_match(&mut h, "shown again"), counts);

    h.app.world_mut().entity_mut(batch).despawn();
    run_until_stats(&mut h, "despawned batch still counted", |s| {
        s.visible.is_empty() && s.shadow_visible.is_empty()
    });
    for _ in 0..8 {
        h.app.update();
    }
    let stats = h.app.world().resource::<GpuCullStats>();
    let of_batch = |b: &Entity| *b == batch;
    assert!(
        !stats.visible.keys().any(|(_, b)| of_batch(b))
            && !stats.visible_per_level.keys().any(|(_, b)| of_batch(b))
            && !stats.timings.keys().any(|(_, b)| of_batch(b))
            && !stats.shadow_visible.keys().any(|(_, b)| of_batch(b)),
        "a despawned batch is still in the stats"
    );
    assert_eq!(visible_diagnostic(&h), Some(0.0));
}
