//! Where a forward camera's opaque batches are drawn: first, in a pass of
//! their own before Bevy's main opaque pass, where the camera has opaque
//! meshes of Bevy's own (so that those behind a batch fail the depth test
//! before they shade); in Bevy's `Opaque3d` phase, without a pass of their
//! own, where it has none (nothing to draw first against).

use crate::harness::*;
use bevy::prelude::*;

/// Runs frames until the batch's draw is where `first` says (drawn first,
/// or in Bevy's phase) and nowhere else; the frame's pixels must show the
/// grid.
fn run_until_drawn(h: &mut Harness, first: bool, what: &str) {
    let start = std::time::Instant::now();
    let mut last = (Vec::new(), Vec::new());
    while start.elapsed() < SETTLE {
        h.app.update();
        last = opaque_batch_draws(h);
        let (drawn_first, in_phase) = &last;
        let (wanted, other) = if first {
            (drawn_first, in_phase)
        } else {
            (in_phase, drawn_first)
        };
        if wanted.contains(&h.batch) && !other.contains(&h.batch) {
            assert_renders(h, what);
            return;
        }
    }
    panic!("{what}: the batch's draw never settled (first, in Bevy's phase): {last:?}");
}

#[test]
fn opaque_batches_are_drawn_first_only_where_bevy_draws_opaque_meshes() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    run_until_counts_match(&mut h, "the grid alone");
    run_until_drawn(&mut h, false, "no mesh of Bevy's: the batch in Bevy's phase");
    // An opaque mesh of Bevy's in view: the batch goes first again.
    let world = h.app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(1.0, 1.0, 1.0));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::srgb(0.9, 0.9, 0.2)));
    let cube = world
        .spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            Transform::from_xyz(0.0, 2.0, -6.0),
        ))
        .id();
    run_until_drawn(&mut h, true, "a mesh of Bevy's: the batch drawn first");
    h.app.world_mut().despawn(cube);
    run_until_drawn(&mut h, false, "the mesh gone: the batch in Bevy's phase again");
}
