//! `GpuCullOcclusion`: a wall hides what it covers (also under MSAA, a
//! temporal jitter and a transformed batch, and by cells), with nothing
//! visible missing; the count of a frame holds its late phase's instances;
//! and two occlusion-culled cameras cull independently.

use crate::common::PipelinesIdle;
use crate::harness::*;
use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::render::gpu_readback::{Readback, ReadbackComplete};
use bevy_gpu_cull::prelude::*;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The camera's visible count for the batch once it has held for a few
/// frames (and the plugin has culled a few), or `None` within the settle
/// time.
fn settled_count(h: &mut Harness) -> Option<u32> {
    let start = std::time::Instant::now();
    let mut last = (u32::MAX, 0);
    while start.elapsed() < SETTLE {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        let count = stats
            .visible
            .get(&(h.cameras[0], h.batch))
            .copied()
            .unwrap_or(u32::MAX);
        last = if count == last.0 {
            (count, last.1 + 1)
        } else {
            (count, 0)
        };
        let idle = h
            .app
            .world()
            .resource::<PipelinesIdle>()
            .0
            .load(Ordering::Relaxed);
        // (Idle for longer than the counts take to come back.)
        if count != u32::MAX && last.1 >= 5 && stats.culled_frames > 5 && idle >= 10 {
            return Some(count);
        }
    }
    None
}

/// The next frame rendered from now on: a new readback of the camera's
/// target, which sees only frames rendered after it exists.
fn next_frame(h: &mut Harness) -> Vec<u8> {
    let world = h.app.world_mut();
    let old: Vec<Entity> = world
        .query_filtered::<Entity, With<Readback>>()
        .iter(world)
        .collect();
    let handle = match world.get::<RenderTarget>(h.cameras[0]) {
        Some(RenderTarget::Image(target)) => target.handle.clone(),
        _ => panic!("the camera renders to an image"),
    };
    for e in old {
        world.despawn(e);
    }
    // Its own observer: a readback of the old entity still in flight would
    // deliver an older frame.
    let pixels = Arc::new(Mutex::new(None));
    let sink = pixels.clone();
    world
        .spawn(Readback::texture(handle))
        .observe(move |event: On<ReadbackComplete>| {
            sink.lock().unwrap().get_or_insert_with(|| event.data.clone());
        });
    for _ in 0..100 {
        h.app.update();
        if let Some(p) = pixels.lock().unwrap().clone() {
            return p;
        }
    }
    panic!("no frame read back");
}

/// Issue 17: with `GpuCullOcclusion` (and Bevy's depth prepass and
/// occlusion culling) on the camera, a wall in front of half the grid hides
/// the instances behind it: the camera's count (early + late phases) falls
/// well below the frustum's; along a sweep of the camera every frame equals
/// the frame rendered with occlusion culling off; and when the wall moves
/// away the very next frame shows what it hid. Rendered without pipelining,
/// so that the test can copy the prepass depth (`install_depth_probe`): the
/// count equals the CPU mirror's against a pyramid built from it. (The
/// other occlusion tests render pipelined.)
#[test]
fn occlusion_culling_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::PlainSynchronous);
}

/// Issue 17 with Bevy's default MSAA (4 samples, here on an HDR camera):
/// the pyramid takes each pixel's farthest sample, and the wall hides as
/// without MSAA, with nothing visible missing.
#[test]
fn occlusion_culling_with_msaa_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::HdrMsaa4);
}

/// Issue 17 with temporal anti-aliasing's jitter on the camera: the late
/// phase widens each sphere's screen rectangle by the jitter, and the wall
/// hides as without it, with nothing visible missing.
#[test]
fn occlusion_culling_with_temporal_jitter_hides_what_a_wall_covers() {
    occlusion_behind_a_wall(CameraSetup::Jittered);
}

/// Occlusion culling on every camera of `h` (with the Bevy components it
/// needs), and a gray wall between the first camera and the left half of
/// the grid; returns the wall.
fn occlusion_with_a_wall(h: &mut Harness) -> Entity {
    let world = h.app.world_mut();
    for &camera in &h.cameras {
        world.entity_mut(camera).insert((
            bevy::core_pipeline::prepass::DepthPrepass,
            bevy::render::occlusion_culling::OcclusionCulling,
            GpuCullOcclusion,
        ));
    }
    let wall_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(30.0, 12.0, 0.5));
    let gray = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from_color(Color::srgb(0.5, 0.5, 0.5)));
    world
        .spawn((
            Mesh3d(wall_mesh),
            MeshMaterial3d(gray),
            Transform::from_xyz(-15.0, 1.0, 2.0),
        ))
        .id()
}

/// The occlusion culling reference of the first camera against a pyramid
/// built on the CPU from `depth` (its prepass depth, reverse-Z): how many
/// instances it must keep (in the frustum and past the pyramid however the
/// GPU rounds) and how many it may keep or cull (borderline in either).
fn occlusion_reference(h: &mut Harness, depth: &[f32]) -> (u32, u32) {
    use cull_core::SphereClass;
    let world = h.app.world_mut();
    let camera = h.cameras[0];
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let (clip_from_view, world_from_view) = (cam.clip_from_view(), transform.to_matrix());
    // As the plugin's cull and late phase: in the batch's frame, the
    // unjittered projection about the camera's position.
    let batch_transform = world.get::<GlobalTransform>(h.batch).unwrap().to_matrix();
    let frame = cull_core::LocalFrame::new(batch_transform).unwrap();
    let frustum = frame
        .frustum_from_view(clip_from_view, world_from_view, None)
        .unwrap();
    let occlusion = frame
        .occlusion_from_view(clip_from_view, world_from_view)
        .unwrap();
    let pyramid =
        cull_core::CpuPyramid::build(WIDTH, HEIGHT, depth, cull_core::DepthOrder::ReverseZ).unwrap();
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let spheres = world
        .get::<GpuCullInstances>(h.batch)
        .unwrap()
        .world_spheres(bounds, format)
        .unwrap();
    let (mut must, mut may) = (0, 0);
    for sphere in spheres.iter().flatten() {
        match (
            frustum.classify(sphere),
            occlusion.classify(sphere, &pyramid).unwrap(),
        ) {
            (SphereClass::Outside, _) | (_, SphereClass::Outside) => {}
            (SphereClass::Inside, SphereClass::Inside) => must += 1,
            _ => may += 1,
        }
    }
    (must, may)
}

fn occlusion_behind_a_wall(setup: CameraSetup) {
    occlusion_behind_a_wall_in(setup, None);
}

/// The instances of `batch` given relative to `frame` (a turn, a uniform
/// scale and a translation), which becomes the batch entity's transform:
/// the scene stays where it was in the world.
fn reframe(world: &mut World, batch: Entity, frame: Transform) {
    let (turn, scale) = (frame.rotation.inverse(), frame.scale.x);
    let instances: Vec<GpuCullInstance> = world
        .get::<GpuCullInstances>(batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| GpuCullInstance {
            position: turn * (i.position - frame.translation) / scale,
            rotation: turn * i.rotation,
            scale: i.scale / scale,
            ..*i
        })
        .collect();
    world
        .get_mut::<GpuCullInstances>(batch)
        .unwrap()
        .replace(instances);
    world.entity_mut(batch).insert(frame);
}

/// Occlusion culling of a batch under a turned, scaled transform far from
/// the origin of its instances' coordinates: the same wall hides the same
/// share, the count is the CPU reference's in the batch's frame, and
/// nothing visible is missing along the sweep.
#[test]
fn occlusion_culling_hides_what_a_wall_covers_in_the_batch_frame() {
    let frame = Transform::from_xyz(40.0, -3.0, -25.0)
        .with_rotation(Quat::from_rotation_y(0.7))
        .with_scale(Vec3::splat(1.5));
    occlusion_behind_a_wall_in(CameraSetup::PlainSynchronous, Some(frame));
}

fn occlusion_behind_a_wall_in(setup: CameraSetup, frame: Option<Transform>) {
    let mut h = harness_with(None, &[looking_down_grid()], setup);
    record_render_errors(&mut h.app);
    if let Some(frame) = frame {
        reframe(h.app.world_mut(), h.batch, frame);
    }
    let camera = h.cameras[0];
    let wall = occlusion_with_a_wall(&mut h);
    // Single-sampled depth is copied where the prepass left it, for the
    // CPU reference (a multisampled one cannot be copied to a buffer).
    let probe = (setup == CameraSetup::PlainSynchronous).then(|| install_depth_probe(&mut h));
    let occluded = settled_count(&mut h).expect("the count settles");
    let in_frustum = expected_visible(&mut h.app, camera, h.batch);
    if let Some(probe) = &probe {
        // Settled, the early phase draws what passed last frame and the
        // late phase adds nothing: the prepass depth is the one the
        // pyramid was built from, and the count is the CPU's reference.
        let depth = prepass_depth(&h, probe);
        assert_eq!(settled_count(&mut h), Some(occluded), "the count moved");
        let (must, may) = occlusion_reference(&mut h, &depth);
        assert!(
            (must..=must + may).contains(&occluded),
            "occlusion culling kept {occluded}; the CPU reference keeps {must} and {may} borderline ({in_frustum} in the frustum)"
        );
        assert!(
            must < in_frustum,
            "the CPU reference hides nothing: {must} of {in_frustum}"
        );
    }
    // At most three quarters kept; a jittered camera's rectangles, widened
    // by its offset, read coarser pyramid levels and hide fewer.
    let (kept, of) = if setup == CameraSetup::Jittered {
        (19, 20)
    } else {
        (3, 4)
    };
    assert!(
        occluded > 0 && occluded < in_frustum * kept / of,
        "the wall hides {} of {in_frustum} instances in the frustum",
        in_frustum - occluded.min(in_frustum)
    );
    assert!(in_frustum > 0);
    // Along a sweep of the camera, each frame equals the frame rendered
    // with occlusion culling off: nothing visible is missing.
    let start = looking_down_grid();
    for (step, yaw) in [0.0f32, 0.3, -0.4, 0.6].into_iter().enumerate() {
        let mut transform = start;
        transform.rotate_around(Vec3::new(0.0, 0.0, -10.0), Quat::from_rotation_y(yaw));
        h.app
            .world_mut()
            .entity_mut(camera)
            .insert((transform, GpuCullOcclusion));
        let occluded_here = settled_count(&mut h).expect("the count settles");
        let with_occlusion = next_frame(&mut h);
        h.app.world_mut().entity_mut(camera).remove::<GpuCullOcclusion>();
        let in_view = expected_visible(&mut h.app, camera, h.batch);
        assert_eq!(
            settled_count(&mut h),
            Some(in_view),
            "step {step}: without occlusion culling"
        );
        assert!(
            occluded_here <= in_view,
            "step {step}: {occluded_here} > {in_view}"
        );
        let without = next_frame(&mut h);
        let changed = changed_pixels(&with_occlusion, &without);
        assert!(
            changed <= (WIDTH * HEIGHT / 500) as usize,
            "step {step}: {changed} pixels differ with occlusion culling on and off"
        );
    }
    h.app.world_mut().entity_mut(camera).insert(start);
    // The wall moves away: the first frame after shows the whole grid.
    h.app.world_mut().entity_mut(camera).insert(GpuCullOcclusion);
    assert_eq!(
        settled_count(&mut h),
        Some(occluded),
        "occlusion culling on again"
    );
    h.app
        .world_mut()
        .entity_mut(wall)
        .insert(Transform::from_xyz(-1000.0, 1.0, 2.0));
    let first = next_frame(&mut h);
    h.app.world_mut().entity_mut(camera).remove::<GpuCullOcclusion>();
    settled_count(&mut h);
    let reference = next_frame(&mut h);
    let changed = changed_pixels(&first, &reference);
    let png = debug_image("first-frame");
    let _ = image::save_buffer(
        &png,
        &frame_pixels(&first).flatten().copied().collect::<Vec<u8>>(),
        WIDTH,
        HEIGHT,
        image::ColorType::Rgba8,
    );
    assert!(
        changed <= (WIDTH * HEIGHT / 500) as usize,
        "the first frame after the wall moved differs from the unoccluded frame in {changed} pixels (see {})",
        png.display()
    );
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// Issues 17 and 19: a batch sorted into cells on an occlusion-culled
/// camera is culled by cells in both phases (reported by cells), keeps the
/// count it had culled flat (fewer than the frustum's: the wall), and
/// renders without errors.
#[test]
fn occlusion_culling_by_cells() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::Plain);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    occlusion_with_a_wall(&mut h);
    let flat = settled_count(&mut h).expect("the count settles");
    h.app.world_mut().entity_mut(h.batch).insert(GpuCullCells {
        min_skipped_bytes: Some(0),
    });
    let start = std::time::Instant::now();
    let cells = loop {
        h.app.update();
        let stats = h.app.world().resource::<GpuCullStats>();
        if let Some(cells) = stats.cells.get(&(camera, h.batch)).filter(|c| c.by_cells) {
            break *cells;
        }
        assert!(
            start.elapsed() < SETTLE,
            "never culled by cells: {:?}",
            stats.cells
        );
    };
    assert!(cells.kept > 0 && cells.kept <= cells.cells, "{cells:?}");
    let by_cells = settled_count(&mut h).expect("the count settles by cells");
    assert_eq!(by_cells, flat, "occlusion culled by cells and flat");
    let in_frustum = expected_visible(&mut h.app, camera, h.batch);
    assert!(
        by_cells < in_frustum,
        "{by_cells} of {in_frustum}: the wall hides nothing"
    );
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// Issue 17: two occlusion-culled cameras keep their own pyramids and
/// histories: a wall in front of the first hides part of its view, while
/// the second, looking at the grid from the other side with the wall behind
/// it, keeps everything in its frustum.
#[test]
fn two_occlusion_culled_cameras_cull_independently() {
    let behind = Transform::from_xyz(0.0, 6.0, -90.0).looking_at(Vec3::new(0.0, 0.0, -60.0), Vec3::Y);
    let mut h = harness_with(None, &[looking_down_grid(), behind], CameraSetup::Plain);
    record_render_errors(&mut h.app);
    occlusion_with_a_wall(&mut h);
    let start = std::time::Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < SETTLE {
        h.app.update();
        let expected = expected_counts(&mut h);
        let stats = h.app.world().resource::<GpuCullStats>();
        last = h
            .cameras
            .iter()
            .map(|&c| stats.visible.get(&(c, h.batch)).copied().unwrap_or(u32::MAX))
            .collect();
        // The first camera sees less than its frustum, the second all of it.
        if stats.culled_frames > 5
            && last[0] > 0
            && last[0] < expected[0] * 3 / 4
            && expected[1] > 0
            && last[1] == expected[1]
        {
            let errors = render_errors(&h.app);
            assert!(errors.is_empty(), "render errors: {errors:#?}");
            return;
        }
    }
    panic!("counts {last:?}, frusta {:?}", expected_counts(&mut h));
}

/// The count of the first frame after the wall moves away: its early phase
/// draws what passed last frame (what the wall left visible), its late
/// phase everything the wall uncovered, and the count is both, every
/// instance in the frustum. (Settled, the late phase adds nothing, so the
/// other tests' counts do not show whether it is counted.) Counts are
/// copied every other frame (while one is mapped the next is skipped): the
/// wall moves just before a frame that is copied, twice.
#[test]
fn the_first_frame_after_the_wall_moves_counts_the_late_phase() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    let camera = h.cameras[0];
    let wall = occlusion_with_a_wall(&mut h);
    let in_place = Transform::from_xyz(-15.0, 1.0, 2.0);
    let occluded = settled_count(&mut h).expect("the count settles");
    let in_frustum = expected_visible(&mut h.app, camera, h.batch);
    assert!(occluded < in_frustum, "the wall hides nothing");
    // A count can miss its frame where a mapping takes longer than a frame
    // (a busy machine): a few tries.
    let mut read = 0;
    for _ in 0..6 {
        if read == 2 {
            break;
        }
        h.app.world_mut().entity_mut(wall).insert(in_place);
        assert_eq!(settled_count(&mut h), Some(occluded), "the wall back");
        // Rendered without pipelining, each update renders one frame, and
        // its stats hold the frame before it culled: the frame the next
        // update renders is this one plus two. Wait for one that will be
        // copied, a frame of the copied frames' parity.
        let stats = |h: &Harness| h.app.world().resource::<GpuCullStats>().clone();
        for _ in 0..2 {
            let now = stats(&h);
            if (now.render_frame + 2 - now.counts_frame) % 2 == 0 {
                break;
            }
            h.app.update();
        }
        let first = stats(&h).render_frame + 2;
        let away = Transform::from_xyz(-1000.0, 1.0, 2.0);
        h.app.world_mut().entity_mut(wall).insert(away);
        for _ in 0..8 {
            h.app.update();
            let now = stats(&h);
            if now.counts_frame == first {
                assert_eq!(
                    now.visible.get(&(camera, h.batch)).copied(),
                    Some(in_frustum),
                    "the first frame without the wall ({occluded} drawn early)"
                );
                read += 1;
                break;
            }
        }
    }
    assert!(read > 0, "no first frame's count was read back in six tries");
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}
