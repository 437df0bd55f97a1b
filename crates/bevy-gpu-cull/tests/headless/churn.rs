//! The soak test: batches, cameras and settings churned for thousands of
//! frames, with counts checked at checkpoints and buffer memory after.

use crate::harness::*;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::image::Image;
use bevy::prelude::*;
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy_gpu_cull::prelude::*;

/// Whether every (camera, batch) count equals the CPU reference for the
/// current format; the first mismatch otherwise.
fn counts_match(h: &mut Harness, cameras: &[Entity], batches: &[Entity]) -> Result<(), String> {
    let world = h.app.world_mut();
    let format = world.resource::<GpuCullSettings>().format;
    for &camera in cameras {
        let frustum = camera_frustum(world, camera);
        for &batch in batches {
            let Some(bounds) = world.get::<GpuCullBounds>(batch).copied() else {
                return Err(format!("batch {batch} has no bounds yet"));
            };
            let instances = world.get::<GpuCullInstances>(batch).unwrap();
            let expected = instances.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
            let got = world
                .resource::<GpuCullStats>()
                .visible
                .get(&(camera, batch))
                .copied();
            // A format without scale culls with the batch's scale range, which
            // edits only widen until the next whole-list change: never fewer
            // than the reference (with the current range), maybe more.
            let ok = match got {
                Some(got) if format.carries_scale() => got == expected,
                Some(got) => got >= expected && got as usize <= instances.len(),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "camera {camera}, batch {batch} ({format:?}): GPU {got:?}, CPU reference {expected}"
                ));
            }
        }
    }
    Ok(())
}

/// Runs frames with no changes until every count matches the reference.
fn settle_counts(h: &mut Harness, cameras: &[Entity], batches: &[Entity], what: &str) {
    let mut last = Ok(());
    for _ in 0..150 {
        h.app.update();
        last = counts_match(h, cameras, batches);
        if last.is_ok() {
            // Two more frames: counts from before the last change may still arrive.
            h.app.update();
            h.app.update();
            if counts_match(h, cameras, batches).is_ok() {
                return;
            }
        }
    }
    panic!("{what}: {}", last.unwrap_err());
}

/// The soak test of the plugin, as two churns side by side (with different
/// seeds, each starting its variant and format cycles elsewhere): frames in
/// which batches are spawned, despawned, grown, shrunk and edited, cameras
/// added and removed, and the variant and format switched every few
/// frames. No wgpu error may occur, the visible counts must equal the CPU
/// reference at checkpoints, and the plugin's GPU buffer memory must return
/// to its starting level once the churn stops. `SOAK_FRAMES` sets each
/// churn's length (default 1000; see docs/bevy-plugin.md for the longer
/// run).
#[test]
fn soak_churn_keeps_counts_and_returns_memory() {
    soak(0x50A4, 0);
}

/// The soak's second churn (see [`soak_churn_keeps_counts_and_returns_memory`]).
#[test]
fn soak_churn_keeps_counts_and_returns_memory_second_seed() {
    soak(0x7E11, 1);
}

/// `SOAK_FRAMES` frames of churn from `seed`, the settings' cycles started
/// `offset` steps in.
fn soak(seed: u64, offset: usize) {
    use cull_core::scene::SceneRng;
    let frames: usize = std::env::var("SOAK_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let started = std::time::Instant::now();
    let mut h = harness(None, &[looking_down_grid()]);
    record_render_errors(&mut h.app);
    let main_camera = h.cameras[0];
    // Every batch draws a tetrahedron: the churn is in the batches, cameras
    // and settings, and lavapipe's frame time is in the vertices it shades
    // (a quarter of the harness's sphere's, half the frame's time).
    let mesh = h
        .app
        .world_mut()
        .resource_mut::<Assets<Mesh>>()
        .add(Tetrahedron::default().mesh());
    h.app.world_mut().entity_mut(h.batch).insert(Mesh3d(mesh.clone()));
    let original = h.app.world().get::<GpuCullInstances>(h.batch).unwrap().clone();
    run_until_counts_match(&mut h, "soak start");
    for _ in 0..4 {
        h.app.update();
    }
    let baseline = h.app.world().resource::<GpuCullStats>().gpu_buffer_bytes;
    assert!(baseline > 0, "the plugin reports its buffers");

    let mut rng = SceneRng::new(seed);
    let variants: Vec<Option<ScanVariant>> = std::iter::once(None)
        .chain(ScanVariant::compiled().map(Some))
        .collect();
    // Each batch draws its instances' scales from its own range, so a packed
    // batch's covering bounds are exercised by every kind of edit.
    let mut batches: Vec<(Entity, f32)> = vec![(h.batch, 1.0)];
    let mut cameras: Vec<Entity> = vec![main_camera];
    let instance = |rng: &mut SceneRng, scale: f32| {
        let mut i = GpuCullInstance::new(
            Vec3::new(
                rng.range(-40.0, 40.0),
                rng.range(-1.0, 1.0),
                rng.range(-80.0, 5.0),
            ),
            LinearRgba::rgb(1.0, 0.2, 0.1),
        );
        i.scale = scale * rng.range(0.5, 2.0);
        // Rotations of any length: normalized for cull and draw alike.
        i.rotation = Quat::from_xyzw(
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            1.0,
        );
        i
    };
    let (mut checkpoints, mut switches) = (0, 0);
    for frame in 0..frames {
        let pick = |rng: &mut SceneRng, n: usize| (rng.unit() * n as f32) as usize % n.max(1);
        if frame % 7 == 0 && batches.len() < 6 {
            let scale = rng.range(0.5, 2.0);
            let n = pick(&mut rng, 800);
            let list = (0..n).map(|_| instance(&mut rng, scale)).collect();
            let entity = h
                .app
                .world_mut()
                .spawn((Mesh3d(mesh.clone()), GpuCullInstances::new(list)))
                .id();
            batches.push((entity, scale));
        }
        if frame % 11 == 5 && batches.len() > 1 {
            let (entity, _) = batches.remove(1 + pick(&mut rng, batches.len() - 1));
            h.app.world_mut().despawn(entity);
        }
        if frame % 3 == 1 {
            let (entity, scale) = batches[pick(&mut rng, batches.len())];
            let mut b = h.app.world_mut().get_mut::<GpuCullInstances>(entity).unwrap();
            let len = b.len();
            match pick(&mut rng, 6) {
                0 if len > 0 => b.set(pick(&mut rng, len), instance(&mut rng, scale)),
                1 if len > 0 => {
                    let start = pick(&mut rng, len);
                    let end = (start + 1 + pick(&mut rng, 50)).min(len);
                    for i in b.edit(start..end) {
                        i.position.y += 0.5;
                    }
                }
                2 => b.extend((0..pick(&mut rng, 1200)).map(|_| instance(&mut rng, scale))),
                3 => b.truncate(pick(&mut rng, len + 1)),
                4 => b.replace(
                    (0..pick(&mut rng, 800))
                        .map(|_| instance(&mut rng, scale))
                        .collect(),
                ),
                _ => b.push(instance(&mut rng, scale)),
            }
        }
        if frame % 13 == 0 && cameras.len() < 3 {
            let world = h.app.world_mut();
            let mut image = Image::new_target_texture(32, 32, TextureFormat::Rgba8UnormSrgb, None);
            image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
            let handle = world.resource_mut::<Assets<Image>>().add(image);
            let eye = Vec3::new(
                rng.range(-30.0, 30.0),
                rng.range(2.0, 10.0),
                rng.range(-20.0, 10.0),
            );
            let camera = world
                .spawn((
                    Camera3d::default(),
                    Camera {
                        order: 10 + frame as isize,
                        ..default()
                    },
                    RenderTarget::Image(ImageRenderTarget {
                        handle,
                        scale_factor: 1.0,
                    }),
                    Msaa::Off,
                    Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.0, -30.0), Vec3::Y),
                ))
                .id();
            cameras.push(camera);
        }
        if frame % 17 == 8 && cameras.len() > 1 {
            let camera = cameras.remove(1 + pick(&mut rng, cameras.len() - 1));
            h.app.world_mut().despawn(camera);
        }
        if frame % 19 == 0 {
            let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
            settings.variant = variants[(frame / 19 + offset) % variants.len()];
            switches += 1;
        }
        if frame % 29 == 0 {
            let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
            settings.format = InstanceFormat::ALL[(frame / 29 + offset) % InstanceFormat::ALL.len()];
        }
        h.app.update();
        if frame % 300 == 299 {
            let ids: Vec<Entity> = batches.iter().map(|b| b.0).collect();
            settle_counts(&mut h, &cameras, &ids, &format!("checkpoint at frame {frame}"));
            checkpoints += 1;
        }
        let errors = render_errors(&h.app);
        assert!(errors.is_empty(), "frame {frame}: wgpu errors: {errors:?}");
    }
    // The churn stops: back to the starting scene and settings, in new
    // entities (a batch's buffers keep the capacity it grew to, so the
    // original batch is replaced rather than restored).
    for &(entity, _) in &batches {
        h.app.world_mut().despawn(entity);
    }
    for &camera in &cameras[1..] {
        h.app.world_mut().despawn(camera);
    }
    *h.app.world_mut().resource_mut::<GpuCullSettings>() = GpuCullSettings::default();
    let batch = h
        .app
        .world_mut()
        .spawn((Mesh3d(mesh), GpuCullInstances::new(original.instances().to_vec())))
        .id();
    settle_counts(&mut h, &[main_camera], &[batch], "after the churn");
    let mut bytes = 0;
    for _ in 0..10 {
        h.app.update();
        bytes = h.app.world().resource::<GpuCullStats>().gpu_buffer_bytes;
        if bytes == baseline {
            break;
        }
    }
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "wgpu errors: {errors:?}");
    assert_eq!(bytes, baseline, "GPU buffer bytes after the churn vs before");
    eprintln!(
        "soak (seed {seed:#x}): {frames} frames, {checkpoints} checkpoints, {switches} variant switches, buffers {baseline} B before and after, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(checkpoints >= frames / 300);
}
