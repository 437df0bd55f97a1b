//! A camera that flies over a field on its own, around a circle, looking
//! ahead: most of the field is behind or beside it. The `spheres`
//! comparison and the `explorer` fly it; the explorer's `Space` hands it to
//! the keys.

use super::{HeadlessRun, SceneArgs};
use bevy::prelude::*;

/// Flies the [`FlyOverCamera`] while [`FlyOver::on`], in
/// [`FlyOverSystems`]; the app inserts [`FlyOver`] and [`SceneArgs`].
pub struct FlyOverPlugin;

impl Plugin for FlyOverPlugin {
    fn build(&self, app: &mut App) {
        let on = |flight: Res<FlyOver>| flight.on;
        app.init_resource::<HeadlessRun>()
            .add_systems(Update, fly_over.run_if(on).in_set(FlyOverSystems));
    }
}

/// The flight's system, for ordering others around it.
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlyOverSystems;

/// The camera the flight moves.
#[derive(Component)]
pub struct FlyOverCamera;

/// The flight: around a circle of radius `orbit`, 10 units above the field,
/// while `on`.
#[derive(Resource)]
pub struct FlyOver {
    /// Whether the flight moves the camera (the explorer's `Space` turns it
    /// off to fly by hand).
    pub on: bool,
    /// The circle's radius.
    pub orbit: f32,
    t: f32,
}

impl FlyOver {
    /// Flying around a circle of radius `orbit`.
    pub fn new(orbit: f32) -> Self {
        Self {
            on: true,
            orbit,
            t: 0.0,
        }
    }
}

/// Headless, the flight moves by frame, not by time, and holds still before
/// the scene is ready and at the end ([`HeadlessRun::camera_still`]), so
/// that every run sees the same.
fn fly_over(
    mut flight: ResMut<FlyOver>,
    args: Res<SceneArgs>,
    run: Res<HeadlessRun>,
    time: Res<Time>,
    mut camera: Query<&mut Transform, With<FlyOverCamera>>,
) {
    let Ok(mut transform) = camera.single_mut() else {
        return;
    };
    flight.t += match args.headless {
        true if run.camera_still(&args) => 0.0,
        true => 0.01,
        false => time.delta_secs() * 0.05,
    };
    let t = flight.t;
    let at = Vec3::new(flight.orbit * t.cos(), 10.0, flight.orbit * t.sin());
    let ahead = Vec3::new(-t.sin(), -0.15, t.cos());
    *transform = Transform::from_translation(at).looking_to(ahead, Vec3::Y);
}
