//! The soak test: batches, cameras and settings churned for a thousand
//! frames, with counts checked at checkpoints and buffer memory after.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use cull_core::scene::SceneRng;

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
    let frames: usize = std::env::var("SOAK_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let started = std::time::Instant::now();
    let mut h = harness(None, &[looking_down_grid()]);
    record_render_errors(&mut h.app);
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

    let mut churn = Churn {
        rng: SceneRng::new(seed),
        mesh,
        batches: vec![(h.batch, 1.0)],
        cameras: vec![h.cameras[0]],
        variants: std::iter::once(None)
            .chain(GpuCullScanVariant::compiled().map(Some))
            .collect(),
        offset,
        switches: 0,
    };
    let mut checkpoints = 0;
    for frame in 0..frames {
        churn.step(&mut h, frame);
        h.app.update();
        if frame % 300 == 299 {
            let ids: Vec<Entity> = churn.batches.iter().map(|b| b.0).collect();
            let what = format!("checkpoint at frame {frame}");
            settle_counts(&mut h, &churn.cameras, &ids, &what);
            checkpoints += 1;
        }
        let errors = render_errors(&h.app);
        assert!(errors.is_empty(), "frame {frame}: wgpu errors: {errors:?}");
    }
    let switches = churn.switches;
    churn.stop(&mut h, &original, baseline);
    eprintln!(
        "soak (seed {seed:#x}): {frames} frames, {checkpoints} checkpoints, {switches} variant switches, buffers {baseline} B before and after, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(checkpoints >= frames / 300);
}

/// What the soak churns: its batches (each with the scale range its
/// instances draw from, so that a packed batch's covering bounds meet every
/// kind of edit), its cameras (the harness's first), and the settings'
/// cycles.
struct Churn {
    rng: SceneRng,
    mesh: Handle<Mesh>,
    batches: Vec<(Entity, f32)>,
    cameras: Vec<Entity>,
    variants: Vec<Option<GpuCullScanVariant>>,
    offset: usize,
    switches: usize,
}

impl Churn {
    /// A number in `0..n` (0 for an empty range).
    fn pick(&mut self, n: usize) -> usize {
        (self.rng.unit() * n as f32) as usize % n.max(1)
    }

    /// An instance somewhere in front of the cameras, scaled within
    /// `scale`'s range, its rotation of any length (normalized for cull and
    /// draw alike).
    fn instance(&mut self, scale: f32) -> GpuCullInstance {
        let rng = &mut self.rng;
        let mut i = GpuCullInstance::new(
            Vec3::new(
                rng.range(-40.0, 40.0),
                rng.range(-1.0, 1.0),
                rng.range(-80.0, 5.0),
            ),
            LinearRgba::rgb(1.0, 0.2, 0.1),
        );
        i.scale = scale * rng.range(0.5, 2.0);
        i.rotation = Quat::from_xyzw(
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            rng.range(-1.0, 1.0),
            1.0,
        );
        i
    }

    fn instances(&mut self, n: usize, scale: f32) -> Vec<GpuCullInstance> {
        (0..n).map(|_| self.instance(scale)).collect()
    }

    /// This frame's changes: batches spawned, despawned and edited, cameras
    /// added and removed, the variant and format switched, each every few
    /// frames.
    fn step(&mut self, h: &mut Harness, frame: usize) {
        if frame.is_multiple_of(7) && self.batches.len() < 6 {
            let scale = self.rng.range(0.5, 2.0);
            let n = self.pick(800);
            let list = self.instances(n, scale);
            let batch = (Mesh3d(self.mesh.clone()), GpuCullInstances::new(list));
            self.batches.push((h.app.world_mut().spawn(batch).id(), scale));
        }
        if frame % 11 == 5 && self.batches.len() > 1 {
            let i = 1 + self.pick(self.batches.len() - 1);
            h.app.world_mut().despawn(self.batches.remove(i).0);
        }
        if frame % 3 == 1 {
            self.edit(h);
        }
        if frame.is_multiple_of(13) && self.cameras.len() < 3 {
            self.add_camera(h, frame);
        }
        if frame % 17 == 8 && self.cameras.len() > 1 {
            let i = 1 + self.pick(self.cameras.len() - 1);
            h.app.world_mut().despawn(self.cameras.remove(i));
        }
        let mut settings = h.app.world_mut().resource_mut::<GpuCullSettings>();
        if frame.is_multiple_of(19) {
            settings.variant = self.variants[(frame / 19 + self.offset) % self.variants.len()];
            self.switches += 1;
        }
        if frame.is_multiple_of(29) {
            settings.format =
                GpuCullInstanceFormat::ALL[(frame / 29 + self.offset) % GpuCullInstanceFormat::ALL.len()];
        }
    }

    /// One edit of a random batch, of a random kind.
    fn edit(&mut self, h: &mut Harness) {
        let i = self.pick(self.batches.len());
        let (entity, scale) = self.batches[i];
        let len = h.app.world().get::<GpuCullInstances>(entity).unwrap().len();
        let kind = self.pick(6);
        let (a, b) = (self.pick(len), self.pick(len + 1));
        let fresh = match kind {
            2 => {
                let n = self.pick(1200);
                self.instances(n, scale)
            }
            4 => {
                let n = self.pick(800);
                self.instances(n, scale)
            }
            _ => vec![self.instance(scale)],
        };
        let span = 1 + self.pick(50);
        let mut batch = h.app.world_mut().get_mut::<GpuCullInstances>(entity).unwrap();
        match kind {
            0 if len > 0 => batch.set(a, fresh[0]),
            1 if len > 0 => {
                for i in batch.edit(a..(a + span).min(len)) {
                    i.position.y += 0.5;
                }
            }
            2 => batch.extend(fresh),
            3 => batch.truncate(b),
            4 => batch.replace(fresh),
            _ => batch.push(fresh[0]),
        }
    }

    /// A camera rendering to a small image from somewhere above the field.
    fn add_camera(&mut self, h: &mut Harness, frame: usize) {
        let rng = &mut self.rng;
        let eye = Vec3::new(
            rng.range(-30.0, 30.0),
            rng.range(2.0, 10.0),
            rng.range(-20.0, 10.0),
        );
        let transform = Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.0, -30.0), Vec3::Y);
        let world = h.app.world_mut();
        let (camera, _) = spawn_image_camera(world, (32, 32), 10 + frame as isize, default(), transform);
        world.entity_mut(camera).insert(Msaa::Off);
        self.cameras.push(camera);
    }

    /// The churn stops: back to the starting scene and settings, in new
    /// entities (a batch's buffers keep the capacity it grew to, so the
    /// original batch is replaced rather than restored). Counts must settle
    /// to the reference, no wgpu error may have occurred, and the plugin's
    /// buffers must return to `baseline` bytes.
    fn stop(self, h: &mut Harness, original: &GpuCullInstances, baseline: u64) {
        for &(entity, _) in &self.batches {
            h.app.world_mut().despawn(entity);
        }
        for &camera in &self.cameras[1..] {
            h.app.world_mut().despawn(camera);
        }
        *h.app.world_mut().resource_mut::<GpuCullSettings>() = GpuCullSettings::default();
        let batch = (
            Mesh3d(self.mesh),
            GpuCullInstances::new(original.instances().to_vec()),
        );
        let batch = h.app.world_mut().spawn(batch).id();
        settle_counts(h, &self.cameras[..1], &[batch], "after the churn");
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
    }
}
