//! Levels of detail: the split by screen size (for the camera, its
//! cascades and a point light's faces), levels facing the camera, and
//! cross-fades.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Whether every level's GPU count lies within the CPU reference for that
/// level (its clearly kept instances, plus any borderline ones).
fn levels_match(
    batch: &GpuCullInstances,
    bounds: GpuCullBounds,
    format: GpuCullInstanceFormat,
    levels: &[cull_core::Frustum],
    got: Option<&Vec<u32>>,
) -> Result<Vec<usize>, String> {
    let got = got.ok_or("no per-level counts yet")?;
    let mut expected = Vec::new();
    for (k, level) in levels.iter().enumerate() {
        let r = batch.reference_on_cpu(bounds, level, format).unwrap();
        let n = *got
            .get(k)
            .ok_or(format!("{} levels counted, {} expected", got.len(), levels.len()))?
            as usize;
        if !(r.visible.len()..=r.visible.len() + r.borderline.len()).contains(&n) {
            return Err(format!(
                "level {k}: {n} drawn, the CPU reference {} (+{} borderline); all: {got:?}",
                r.visible.len(),
                r.borderline.len()
            ));
        }
        expected.push(r.visible.len());
    }
    Ok(expected)
}

/// Issue 17: a batch with levels of detail draws each instance with the
/// mesh its projected size on screen picks, and culls it past the last
/// level. The camera's count per level equals the CPU reference for that
/// level's band, and each shadow cascade draws its casters at the levels
/// the camera chose (the camera's sizes against the cascade's frustum).
#[test]
fn levels_of_detail_split_the_instances_by_screen_size() {
    // The camera sees the grid from 8 to 100 units away: a sphere of radius
    // 0.5 covers from about 0.12 to 0.012 of the screen height there.
    levels_follow_screen_size(|_| vec![0.06, 0.025, 0.012]);
}

/// The most levels a batch may have (`GpuCullLod::MAX_LEVELS`, every list of one
/// multi-view cull for the camera): each level's count equals the CPU
/// reference, for the camera and for each cascade, whose 8 levels are
/// culled cascade by cascade (4 cascades' lists would not fit one pass).
#[test]
fn the_most_levels_of_detail_split_the_instances_by_screen_size() {
    levels_follow_screen_size(|sizes| {
        // Between the visible instances' sizes at quantiles, so that each
        // level holds some; the last cuts off the smallest tenth.
        (0..GpuCullLod::MAX_LEVELS)
            .map(|k| threshold_at(sizes, 0.9 * (k + 1) as f64 / GpuCullLod::MAX_LEVELS as f64))
            .collect()
    });
}

/// A level facing the camera (`GpuCullLodLevel::facing_camera`, an impostor) draws
/// its flat mesh turned like the view, whatever the instances' rotation:
/// quads that the instances lay flat on the ground cover the pixels of
/// quads each turned by the camera's own rotation (drawn as an ordinary
/// level), several times what they cover lying flat, seen at a grazing
/// angle. The facing level is the second of two (its own level uniform),
/// and the camera has a depth prepass, whose depth the main pass must meet
/// exactly for the pixels to show.
#[test]
fn a_level_facing_the_camera_turns_its_mesh_toward_the_view() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    world
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    let camera_rotation = world.get::<Transform>(camera).unwrap().rotation;
    let sphere = world.get::<Mesh3d>(h.batch).unwrap().0.clone();
    // A quad in the mesh's XY plane.
    let quad = world.resource_mut::<Assets<Mesh>>().add(Rectangle::new(0.6, 0.6));
    let grid = world
        .get::<GpuCullInstances>(h.batch)
        .unwrap()
        .instances()
        .to_vec();
    let turned =
        |rotation: Quat| -> Vec<GpuCullInstance> { grid.iter().map(|i| i.with_rotation(rotation)).collect() };
    let flat = Quat::from_rotation_x(-std::f32::consts::FRAC_PI_2);
    // Instances turned by `rotation`, drawn at level 1 (level 0, the
    // sphere, holds nothing that small), facing the camera or not: the
    // pixels that show the quads once the draw has settled.
    let pixels = |h: &mut Harness, rotation: Quat, facing: bool| -> Vec<bool> {
        let level = GpuCullLodLevel::new(quad.clone(), 0.0);
        let level = if facing { level.facing_camera() } else { level };
        let world = h.app.world_mut();
        world
            .get_mut::<GpuCullInstances>(h.batch)
            .unwrap()
            .replace(turned(rotation));
        world.entity_mut(h.batch).insert(GpuCullLod::new([
            GpuCullLodLevel::new(sphere.clone(), 10.0),
            level,
        ]));
        run_until_counts_match(h, "quads");
        settled_red_pixels(h)
    };
    let count = |p: &[bool]| p.iter().filter(|p| **p).count();
    let lying = pixels(&mut h, flat, false);
    let facing = pixels(&mut h, flat, true);
    let turned_like_the_camera = pixels(&mut h, camera_rotation, false);
    let lying_again = pixels(&mut h, flat, false);
    let (n_lying, n_facing, n_turned) = (count(&lying), count(&facing), count(&turned_like_the_camera));
    assert!(n_lying > 20, "only {n_lying} pixels show the flat quads");
    assert!(
        n_facing > 2 * n_lying,
        "quads facing the camera cover {n_facing} pixels, lying flat {n_lying}"
    );
    // The same pixels as quads turned like the camera, but for rounding
    // along their edges (a matrix against a quaternion).
    let differ = facing
        .iter()
        .zip(&turned_like_the_camera)
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        differ * 50 <= n_turned,
        "{differ} pixels differ between quads facing the camera ({n_facing}) and quads turned like it ({n_turned})"
    );
    assert_eq!(lying_again, lying, "the level no longer faces the camera");
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 17 (cross-fade): levels that cross-fade keep an instance in both
/// levels across the fade (each level's count equals the CPU reference for
/// overlapping bands), and split its pixels between the two. With a large
/// quad as the fine level and a small one as the coarse level, both facing
/// the camera, under a depth prepass: the frame shows every pixel that the
/// levels switching at the fade's top end show (no holes where the levels
/// hand over), none that switching at its bottom end does not show, and
/// of the pixels between the two a share: the large quads' rings across
/// the fade are dithered out in part, in the depth prepass as in the main
/// pass. Culled in the packed format, both
/// levels are drawn in full across the fade instead.
#[test]
fn levels_that_cross_fade_split_their_pixels_between_them() {
    let (mut h, metric, bounds, sizes) = grid_sizes();
    let camera = h.cameras[0];
    let probe = install_depth_probe(&mut h);
    let world = h.app.world_mut();
    world
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    const FADE: f32 = 0.5;
    let threshold = threshold_at(&sizes, 0.6);
    // Corners within the bounds' radius (0.5): the quads turn about their
    // centre.
    let mut meshes = world.resource_mut::<Assets<Mesh>>();
    let large = meshes.add(Rectangle::new(0.7, 0.7));
    let small = meshes.add(Rectangle::new(0.35, 0.35));
    let lod = |threshold: f32, fade: f32| {
        GpuCullLod::new([
            GpuCullLodLevel::new(large.clone(), threshold).facing_camera(),
            GpuCullLodLevel::new(small.clone(), 0.0).facing_camera(),
        ])
        .with_cross_fade(fade)
    };
    // The pixels that show the quads once the draw has settled, after the
    // counts match the reference for overlapping levels when `check` asks.
    let shown = |h: &mut Harness, lod: GpuCullLod, check: bool| -> Vec<bool> {
        h.app.world_mut().entity_mut(h.batch).insert(lod.clone());
        let start = std::time::Instant::now();
        if check {
            loop {
                h.app.update();
                let world = h.app.world_mut();
                let thresholds: Vec<f32> = lod.levels.iter().map(|l| l.min_screen_size).collect();
                let levels = camera_frustum(world, camera)
                    .detail_levels_overlapping(metric, &thresholds, lod.cross_fade)
                    .unwrap();
                let format = world.resource::<GpuCullSettings>().format;
                let batch = world.get::<GpuCullInstances>(h.batch).unwrap().clone();
                let stats = world.resource::<GpuCullStats>().clone();
                match levels_match(
                    &batch,
                    bounds,
                    format,
                    &levels,
                    stats.visible_per_level.get(&(camera, h.batch)),
                ) {
                    Ok(expected) => {
                        let plain = batch
                            .reference_on_cpu(bounds, &camera_frustum(world, camera), format)
                            .unwrap()
                            .visible
                            .len();
                        // Both levels hold instances of their own, and some
                        // instances are in both (in the fade).
                        let both = expected[0] + expected[1] - plain;
                        assert!(
                            both > 0 && expected[0] > both && expected[1] > both,
                            "levels {expected:?} of {plain} instances: none or all in the fade"
                        );
                        break;
                    }
                    Err(e) if start.elapsed() > SETTLE => panic!("cross-fade counts: {e}"),
                    Err(_) => {}
                }
            }
        }
        settled_red_pixels(h)
    };
    let count = |p: &[bool]| p.iter().filter(|p| **p).count();
    let switch_low = shown(&mut h, lod(threshold, 0.0), false);
    let faded = shown(&mut h, lod(threshold, FADE), true);
    // The depth prepass keeps the pixels the main pass keeps: depth is set
    // (reverse-Z, cleared to 0) exactly where the faded frame shows quads.
    let depth = prepass_depth(&h, &probe);
    let differ = faded
        .iter()
        .zip(&depth)
        .filter(|(shown, depth)| **shown != (**depth > 0.0))
        .count();
    assert!(
        differ <= 2,
        "{differ} pixels differ between the prepass depth and the faded frame ({} pixels)",
        faded.iter().filter(|p| **p).count()
    );
    let switch_high = shown(&mut h, lod(threshold * (1.0 + FADE), 0.0), false);
    let (low, fade, high) = (count(&switch_low), count(&faded), count(&switch_high));
    let holes = switch_high
        .iter()
        .zip(&faded)
        .filter(|(h, f)| **h && !**f)
        .count();
    let extra = faded.iter().zip(&switch_low).filter(|(f, l)| **f && !**l).count();
    assert_eq!(
        holes, 0,
        "pixels that both levels leave out: {high} shown switching above the fade, {fade} faded"
    );
    assert_eq!(
        extra, 0,
        "pixels shown only in the fade: {fade} faded, {low} switching below it"
    );
    assert!(
        low > high + 20,
        "the fade covers too few pixels: {low} switching below it, {high} above"
    );
    let share = (fade - high) as f64 / (low - high) as f64;
    assert!(
        (0.15..=0.85).contains(&share),
        "the fade shows {share:.2} of the pixels between switching above it ({high}) and below it ({low}): {fade}"
    );
    // Culled in the packed format, whose spheres the draw cannot size, both
    // levels are drawn in full across the fade: the pixels of switching
    // below it (the small quads lie inside the large ones).
    h.app.world_mut().resource_mut::<GpuCullSettings>().format = GpuCullInstanceFormat::Packed16;
    let packed_low = shown(&mut h, lod(threshold, 0.0), false);
    let packed_faded = shown(&mut h, lod(threshold, FADE), true);
    assert!(count(&packed_low) > high, "packed: {} pixels", count(&packed_low));
    assert!(
        packed_faded == packed_low,
        "packed: the fade dithers ({} pixels, {} switching below it)",
        count(&packed_faded),
        count(&packed_low)
    );
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Which pixels of the frame are red once the draw has settled: some, and
/// the same for 10 frames (a new mesh and pipeline may take frames to be
/// ready).
fn settled_red_pixels(h: &mut Harness) -> Vec<bool> {
    let (mut last, mut same) = (Vec::new(), 0);
    let start = std::time::Instant::now();
    while !(last.contains(&true) && same >= 10) && start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        let shown: Vec<bool> = frame_rows(&padded, 0..HEIGHT as usize).map(is_red).collect();
        same = if shown == last { same + 1 } else { 0 };
        last = shown;
    }
    last
}

/// `harness_with`'s grid seen by `looking_down_grid`, once the batch has
/// its bounds (from its mesh, after the app has run), with the camera's
/// size metric and the sizes of the instances in its view, largest first.
fn grid_sizes() -> (Harness, cull_core::SizeMetric, GpuCullBounds, Vec<f64>) {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    while h.app.world().get::<GpuCullBounds>(h.batch).is_none() {
        h.app.update();
    }
    let world = h.app.world_mut();
    let metric = camera_metric(world, camera);
    let frustum = camera_frustum(world, camera);
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let mut sizes: Vec<f64> = world
        .get::<GpuCullInstances>(h.batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| (i.position + bounds.center * i.scale, bounds.radius * i.scale))
        .filter(|(center, radius)| frustum.intersects_sphere(*center, *radius))
        .map(|(center, radius)| metric.size(center, radius))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    (h, metric, bounds, sizes)
}

/// The size metric of `camera`'s projection and transform.
fn camera_metric(world: &mut World, camera: Entity) -> cull_core::SizeMetric {
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    cull_core::SizeMetric::from_view(cam.clip_from_view(), transform.to_matrix())
}

/// A threshold halfway between two neighbouring sizes at quantile `q` of
/// `sizes` (largest first), so that no instance sits on it.
fn threshold_at(sizes: &[f64], q: f64) -> f32 {
    let j = ((q * sizes.len() as f64) as usize).min(sizes.len() - 2);
    (0.5 * (sizes[j] + sizes[j + 1])) as f32
}

/// Gives the batch of `harness_with`'s grid, seen by `looking_down_grid`,
/// levels of detail at the thresholds `pick` chooses from the sizes of the
/// instances in view (largest first), and checks each level's count for the
/// camera alone, then with shadows for each cascade too.
fn levels_follow_screen_size(pick: impl Fn(&[f64]) -> Vec<f32>) {
    let (mut h, metric, _, sizes) = grid_sizes();
    let camera = h.cameras[0];
    let thresholds = pick(&sizes);
    let world = h.app.world_mut();
    let mut meshes = world.resource_mut::<Assets<Mesh>>();
    let level_meshes: Vec<Handle<Mesh>> = (0..thresholds.len())
        .map(|k| match k % 3 {
            0 => meshes.add(Sphere::new(0.5).mesh().ico(1).unwrap()),
            1 => meshes.add(Sphere::new(0.5).mesh().ico(0).unwrap()),
            _ => meshes.add(Cuboid::new(0.8, 0.8, 0.8)),
        })
        .collect();
    world.entity_mut(h.batch).insert(GpuCullLod::new(
        level_meshes.into_iter().zip(thresholds.iter().copied()),
    ));
    let check = |world: &mut World, shadows: bool| -> Result<(), String> {
        let frustum = camera_frustum(world, camera);
        let levels = frustum.detail_levels(metric, &thresholds).unwrap();
        let format = world.resource::<GpuCullSettings>().format;
        let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
        let batch = world.get::<GpuCullInstances>(h.batch).unwrap().clone();
        let stats = world.resource::<GpuCullStats>().clone();
        let expected = levels_match(
            &batch,
            bounds,
            format,
            &levels,
            stats.visible_per_level.get(&(camera, h.batch)),
        )?;
        assert!(
            expected.iter().all(|n| *n > 0),
            "every level should hold instances in this view: {expected:?}"
        );
        if !shadows {
            return Ok(());
        }
        let (light, volumes) = cascade_volumes(world, camera).ok_or("no cascades yet")?;
        for (index, volume) in volumes.iter().enumerate() {
            let levels = volume.reach.detail_levels(metric, &thresholds).unwrap();
            let id = GpuCullShadowView {
                light,
                camera: Some(camera),
                index: index as u32,
            };
            levels_match(
                &batch,
                bounds,
                format,
                &levels,
                stats.shadow_visible_per_level.get(&(id, h.batch)),
            )
            .map_err(|e| format!("cascade {index}: {e}"))?;
        }
        Ok(())
    };
    // Without shadows, the camera is culled alone, with one frustum test
    // for all its levels (VisibilityTest::DetailLevels); with them, together
    // with its cascades, each view's levels with their own frustum test.
    // First without: the first counts come from the first kernel.
    for shadows in [false, true] {
        let world = h.app.world_mut();
        for mut light in world.query::<&mut DirectionalLight>().iter_mut(world) {
            light.shadow_maps_enabled = shadows;
        }
        let start = std::time::Instant::now();
        loop {
            h.app.update();
            match check(h.app.world_mut(), shadows) {
                Ok(()) => break,
                Err(e) if start.elapsed() > SETTLE => panic!("shadows {shadows}: {e}"),
                Err(_) => {}
            }
        }
    }
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:?}");
}

/// Issue 17: a point light's six faces draw a batch with levels of detail
/// at the levels the camera chose: each face's count per level equals the
/// CPU reference for the face's frustum with the camera's sizes.
#[test]
fn point_light_faces_take_the_cameras_levels_of_detail() {
    let mut h = shadow_scene("point", true);
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    let metric = camera_metric(world, camera);
    // Thresholds between the instances' sizes, so that each level holds some.
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCullInstances>(h.batch).unwrap().clone();
    let mut sizes: Vec<f64> = batch
        .instances()
        .iter()
        .map(|i| metric.size(i.position + bounds.center * i.scale, bounds.radius * i.scale))
        .collect();
    sizes.sort_by(|a, b| b.total_cmp(a));
    let thresholds = [threshold_at(&sizes, 0.25), threshold_at(&sizes, 0.6), 0.0];
    let mesh = world.get::<Mesh3d>(h.batch).unwrap().0.clone();
    let coarse = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.5).mesh().ico(0).unwrap());
    let cube = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.8, 0.8, 0.8));
    world.entity_mut(h.batch).insert(GpuCullLod::new([
        (mesh, thresholds[0]),
        (coarse, thresholds[1]),
        (cube, thresholds[2]),
    ]));
    let check = |world: &mut World| -> Result<(), String> {
        let (light, light_transform, point) = world
            .query::<(Entity, &GlobalTransform, &PointLight)>()
            .single(world)
            .unwrap();
        let (position, near, range) = (
            light_transform.translation(),
            point.shadow_map_near_z,
            point.range,
        );
        let format = world.resource::<GpuCullSettings>().format;
        let stats = world.resource::<GpuCullStats>().clone();
        let projection = Mat4::perspective_infinite_reverse_rh(std::f32::consts::FRAC_PI_2, 1.0, near);
        let mut drawn = 0;
        for (index, face) in bevy::camera::primitives::CUBE_MAP_FACES.iter().enumerate() {
            let world_from_view = GlobalTransform::from_translation(position)
                * Transform::IDENTITY.looking_at(face.target, face.up);
            let frustum =
                cull_core::Frustum::from_view(projection, world_from_view.to_matrix(), Some(range)).unwrap();
            let levels = frustum.detail_levels(metric, &thresholds).unwrap();
            let id = GpuCullShadowView {
                light,
                camera: None,
                index: index as u32,
            };
            let expected = levels_match(
                &batch,
                bounds,
                format,
                &levels,
                stats.shadow_visible_per_level.get(&(id, h.batch)),
            )
            .map_err(|e| format!("face {index}: {e}"))?;
            drawn += expected.iter().filter(|n| **n > 0).count();
        }
        // The faces together draw more than one level.
        if drawn < 2 {
            return Err(format!("only {drawn} (face, level) lists hold instances"));
        }
        Ok(())
    };
    let start = std::time::Instant::now();
    loop {
        h.app.update();
        match check(h.app.world_mut()) {
            Ok(()) => break,
            Err(e) if start.elapsed() > SETTLE => panic!("{e}"),
            Err(_) => {}
        }
    }
}
