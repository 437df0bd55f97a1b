//! Batches drawn together (`GpuCullSettings::merge_batches`): batches of
//! one mesh and transform whose bindless materials share a bind group are
//! culled and drawn as one, and each keeps its own counts, exactly the CPU
//! reference's, through edits, resizes (one every frame), a material that
//! takes one out, hiding, and the setting switched off.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Sizes of the batches drawn together: one instance, a workgroup's worth
/// and one more, a few hundred, and a batch out of the camera's view.
const SIZES: [usize; 4] = [1, 257, 300, 40];

/// Spawns the batches of `SIZES` on the grid's rows (the last far behind
/// the camera), sharing `mesh` and a material (which draws them together on
/// every device: bindless materials are not needed).
fn spawn_members(world: &mut World, mesh: Handle<Mesh>) -> Vec<Entity> {
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::srgb(0.2, 0.7, 0.3)));
    // The first member's one instance in the middle of the view.
    let mut next = 20usize;
    SIZES
        .iter()
        .enumerate()
        .map(|(k, &size)| {
            let far = if k == SIZES.len() - 1 { 500.0 } else { 0.0 };
            let instances = (next..next + size)
                .map(|i| {
                    let position = Vec3::new((i % 40) as f32 * 2.0 - 39.0, 0.5, (i / 40) as f32 * -2.0 + far);
                    GpuCullInstance::new(position, LinearRgba::WHITE)
                })
                .collect();
            next += size;
            world
                .spawn((
                    Mesh3d(mesh.clone()),
                    MeshMaterial3d(material.clone()),
                    GpuCullInstances::new(instances),
                ))
                .id()
        })
        .collect()
}

/// The GPU's and the CPU reference's counts of `batches` for the camera.
fn counts(h: &mut Harness, batches: &[Entity]) -> (Vec<Option<u32>>, Vec<Option<u32>>) {
    let camera = h.cameras[0];
    let expected = batches
        .iter()
        .map(|&b| {
            let visible = h
                .app
                .world()
                .get::<InheritedVisibility>(b)
                .is_some_and(|v| v.get());
            visible.then(|| expected_visible(&mut h.app, camera, b))
        })
        .collect();
    let stats = h.app.world().resource::<GpuCullStats>();
    let got = batches
        .iter()
        .map(|&b| stats.visible.get(&(camera, b)).copied())
        .collect();
    (got, expected)
}

/// The plugin's opaque draws of the camera last frame, as the main-world
/// batch each draws for (drawn first or in Bevy's phase).
fn opaque_draws(h: &Harness) -> Vec<Entity> {
    let (first, in_bevy_phase) = opaque_batch_draws(h);
    first.into_iter().chain(in_bevy_phase).collect()
}

/// Runs frames until each batch's count is the reference's (`None` for a
/// hidden batch) and the camera's opaque draws are `draws` of them.
fn run_until_counts_and_draws(
    h: &mut Harness,
    batches: &[Entity],
    draws: usize,
    what: &str,
) -> Vec<Option<u32>> {
    let start = std::time::Instant::now();
    let mut last = (Vec::new(), Vec::new(), Vec::new());
    while start.elapsed() < SETTLE {
        h.app.update();
        let (got, expected) = counts(h, batches);
        let drawn = opaque_draws(h);
        if got == expected && drawn.len() == draws {
            return got;
        }
        last = (got, expected, drawn);
    }
    panic!(
        "{what}: GPU counts {:?}, CPU reference {:?}, opaque draws for {:?} (wanted {draws})",
        last.0, last.1, last.2
    );
}

#[test]
fn batches_drawn_together_keep_their_own_counts() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let world = h.app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.8, 0.8, 0.8));
    let members = spawn_members(world, mesh);
    let all: Vec<Entity> = std::iter::once(h.batch).chain(members.iter().copied()).collect();
    // The grid (no material of its own) and the members, together.
    let first = run_until_counts_and_draws(&mut h, &all, 2, "drawn together");
    assert!(first[1..4].iter().all(|c| c.is_some_and(|c| c > 0)), "{first:?}");
    assert_eq!(first[4], Some(0), "the far batch is out of view");
    let draws = opaque_draws(&h);
    assert!(
        draws.iter().any(|d| members.contains(d)),
        "the combined batch draws under one of its members: {draws:?}, members {members:?}"
    );

    // An edit of one member (same length): half its instances lifted out of
    // view.
    let world = h.app.world_mut();
    let mut batch = world.get_mut::<GpuCullInstances>(members[2]).unwrap();
    for i in (0..batch.len()).step_by(2) {
        let mut instance = batch.instances()[i];
        instance.position.y += 1000.0;
        batch.set(i, instance);
    }
    let edited = run_until_counts_and_draws(&mut h, &all, 2, "after an edit");
    assert!(edited[3] < first[3], "{first:?} -> {edited:?}");

    // A member grows: the group is made again.
    let world = h.app.world_mut();
    let grown = GpuCullInstance::new(Vec3::new(0.0, 0.5, -4.0), LinearRgba::WHITE);
    world.get_mut::<GpuCullInstances>(members[0]).unwrap().push(grown);
    let more = run_until_counts_and_draws(&mut h, &all, 2, "after a member grew");
    assert_eq!(more[1], first[1].map(|c| c + 1));

    // A member that grows every frame stays in its group, which draws in
    // every frame (its lists are laid out again in place).
    for i in 0..20 {
        let world = h.app.world_mut();
        let position = Vec3::new(2.0 * (i % 10) as f32 - 9.0, 0.5, -6.0);
        let grown = GpuCullInstance::new(position, LinearRgba::WHITE);
        world.get_mut::<GpuCullInstances>(members[2]).unwrap().push(grown);
        h.app.update();
        let draws = opaque_draws(&h);
        assert_eq!(
            draws.len(),
            2,
            "frame {i} of a member growing: draws for {draws:?}"
        );
    }
    run_until_counts_and_draws(&mut h, &all, 2, "after a member grew every frame");

    // A blended material takes a member out: it is drawn on its own, in
    // the transparent phase.
    let world = h.app.world_mut();
    let blended = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgba(1.0, 1.0, 1.0, 0.5),
            alpha_mode: AlphaMode::Blend,
            ..default()
        });
    world.entity_mut(members[1]).insert(MeshMaterial3d(blended));
    run_until_counts_and_draws(&mut h, &all, 2, "a member blended");

    // Hidden: no counts for it; the others still together.
    let world = h.app.world_mut();
    world.entity_mut(members[2]).insert(Visibility::Hidden);
    let hidden = run_until_counts_and_draws(&mut h, &all, 2, "a member hidden");
    assert_eq!(hidden[3], None);

    // The setting off: every batch on its own (the grid, two members; the
    // blended one in its own phase, the hidden one not at all).
    h.app.world_mut().resource_mut::<GpuCullSettings>().merge_batches = false;
    run_until_counts_and_draws(&mut h, &all, 3, "not drawn together");
    h.app
        .world_mut()
        .entity_mut(members[2])
        .insert(Visibility::Inherited);
    run_until_counts_and_draws(&mut h, &all, 4, "shown again, on its own");
}
