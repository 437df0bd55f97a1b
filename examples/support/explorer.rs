//! The explorer example's keys: they switch the plugin's settings and the
//! batch's options at run time, fly the camera by hand, and a HUD says what
//! is on.
//!
//! Keys: `V` next scan variant, `F` next instance format, `L` shadows,
//! `N` levels of detail, `O` occlusion culling, `P` write the scene file of
//! the current view (`gpu-cull-capture.json`, for cull-core's `replay`),
//! `C` freeze the culling frustum (fly away to see what was culled; the
//! frozen frustum is drawn), `Space` the automatic flight on or off,
//! `W A S D Q E` move, right mouse button and drag to look around.

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

pub use super::explorer_hud::hud;
use super::explorer_hud::{draw_frozen_frustum, show_hud};
use super::fly_over::{FlyOver, FlyOverCamera, FlyOverPlugin, FlyOverSystems};
use bevy::input::mouse::AccumulatedMouseMotion;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The explorer's systems, with the automatic flight's
/// ([`FlyOverPlugin`]); the app inserts [`Explorer`] and [`FlyOver`], and
/// spawns a [`FlyOverCamera`] (the camera the keys act on) and [`hud`].
pub struct ExplorerPlugin;

impl Plugin for ExplorerPlugin {
    fn build(&self, app: &mut App) {
        if !app.is_plugin_added::<FlyOverPlugin>() {
            app.add_plugins(FlyOverPlugin);
        }
        // The keys first: `Space` hands the camera from one flight to the
        // other within the frame.
        let by_hand = |flight: Res<FlyOver>| !flight.on;
        app.add_systems(
            Update,
            (keys, fly_by_hand.run_if(by_hand), show_hud, draw_frozen_frustum).chain(),
        )
        .configure_sets(Update, FlyOverSystems.after(keys));
    }
}

/// The explorer's state: where the keys' camera looks (`yaw`, `pitch`),
/// and the levels `N` toggles.
#[derive(Resource)]
pub struct Explorer {
    /// The levels of detail `N` puts on the batch and takes off.
    pub levels: GpuCullLod,
    yaw: f32,
    pitch: f32,
}

impl Explorer {
    /// `N` toggles `levels` on the batch.
    pub fn new(levels: GpuCullLod) -> Self {
        Self {
            levels,
            yaw: 0.0,
            pitch: -0.25,
        }
    }
}

/// With the automatic flight off (`Space`), the keys and the mouse fly the
/// camera.
fn fly_by_hand(
    mut explorer: ResMut<Explorer>,
    time: Res<Time>,
    keys: Res<ButtonInput<KeyCode>>,
    mouse: Res<ButtonInput<MouseButton>>,
    motion: Res<AccumulatedMouseMotion>,
    mut camera: Query<&mut Transform, With<FlyOverCamera>>,
) {
    let Ok(mut transform) = camera.single_mut() else {
        return;
    };
    if mouse.pressed(MouseButton::Right) {
        explorer.yaw -= motion.delta.x * 0.003;
        explorer.pitch = (explorer.pitch - motion.delta.y * 0.003).clamp(-1.5, 1.5);
    }
    transform.rotation = Quat::from_euler(EulerRot::YXZ, explorer.yaw, explorer.pitch, 0.0);
    let speed = if keys.pressed(KeyCode::ShiftLeft) {
        120.0
    } else {
        30.0
    } * time.delta_secs();
    let (forward, right) = (*transform.forward(), *transform.right());
    for (key, dir) in [
        (KeyCode::KeyW, forward),
        (KeyCode::KeyS, -forward),
        (KeyCode::KeyD, right),
        (KeyCode::KeyA, -right),
        (KeyCode::KeyE, Vec3::Y),
        (KeyCode::KeyQ, -Vec3::Y),
    ] {
        if keys.pressed(key) {
            transform.translation += dir * speed;
        }
    }
}

/// The next of `all` after `current` (the first when it is not there).
fn next<T: Copy + PartialEq>(all: &[T], current: T) -> T {
    all.iter()
        .position(|v| *v == current)
        .map_or(all[0], |i| all[(i + 1) % all.len()])
}

fn keys(
    keys: Res<ButtonInput<KeyCode>>,
    mut lights: Query<&mut DirectionalLight>,
    batches: Query<(Entity, Has<GpuCullLod>), With<GpuCullInstances>>,
    mut captures: MessageWriter<GpuCullCaptureScene>,
    mut settings: ResMut<GpuCullSettings>,
    stats: Res<GpuCullStats>,
    mut explorer: ResMut<Explorer>,
    mut flight: ResMut<FlyOver>,
    mut commands: Commands,
    camera: Query<(Entity, &Camera, &GlobalTransform, Has<GpuCullFrustumOverride>), With<FlyOverCamera>>,
    occluding: Query<(), (With<FlyOverCamera>, With<GpuCullOcclusion>)>,
) {
    let Ok((camera, cam, transform, frozen)) = camera.single() else {
        return;
    };
    let (batch, has_levels) = batches.single().map_or((None, false), |(b, l)| (Some(b), l));
    let pressed = |key| keys.just_pressed(key);
    if pressed(KeyCode::KeyO) && occluding.is_empty() {
        commands.entity(camera).insert(GpuCullOcclusion);
    } else if pressed(KeyCode::KeyO) {
        commands.entity(camera).remove::<GpuCullOcclusion>();
    }
    if pressed(KeyCode::KeyV) {
        // Only compiled-in variants are offered; the plugin falls back from
        // ones the adapter lacks.
        let all: Vec<GpuCullScanVariant> = GpuCullScanVariant::compiled().collect();
        settings.variant = Some(next(&all, settings.variant.or(stats.variant).unwrap_or(all[0])));
    }
    if pressed(KeyCode::KeyF) {
        settings.format = next(&GpuCullInstanceFormat::ALL, settings.format);
    }
    if let Some(batch) = batch.filter(|_| pressed(KeyCode::KeyP)) {
        let path = "gpu-cull-capture.json".into();
        captures.write(GpuCullCaptureScene { camera, batch, path });
    }
    if let Some(batch) = batch.filter(|_| pressed(KeyCode::KeyN)) {
        if has_levels {
            commands.entity(batch).remove::<GpuCullLod>();
        } else {
            commands.entity(batch).insert(explorer.levels.clone());
        }
    }
    if pressed(KeyCode::KeyL) {
        for mut light in &mut lights {
            light.shadow_maps_enabled = !light.shadow_maps_enabled;
        }
    }
    if pressed(KeyCode::Space) {
        flight.on = !flight.on;
        let (yaw, pitch, _) = transform.rotation().to_euler(EulerRot::YXZ);
        (explorer.yaw, explorer.pitch) = (yaw, pitch);
    }
    if pressed(KeyCode::KeyC) && frozen {
        commands.entity(camera).remove::<GpuCullFrustumOverride>();
    } else if pressed(KeyCode::KeyC) {
        let clip_from_world = cam.clip_from_view() * transform.to_matrix().inverse();
        commands
            .entity(camera)
            .insert(GpuCullFrustumOverride { clip_from_world });
    }
}
