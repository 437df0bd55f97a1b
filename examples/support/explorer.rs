//! The spheres example's explorer: a camera that flies through the field on
//! its own or under the keys, keys that switch the plugin's settings and
//! the batch's options at run time, and a HUD that says what is on.
//!
//! Keys: `V` next scan variant, `F` next instance format, `L` shadows,
//! `N` levels of detail, `O` occlusion culling, `P` write the scene file of
//! the current view (`gpu-cull-capture.json`, for cull-core's `replay`),
//! `C` freeze the culling frustum (fly away to see what was culled; the
//! frozen frustum is drawn), `Space` automatic fly-through, `W A S D Q E`
//! move, right mouse button and drag to look around.

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

pub use super::explorer_hud::hud;
use super::explorer_hud::{draw_frozen_frustum, show_hud};
use super::{HeadlessRun, SceneArgs};
use bevy::input::mouse::AccumulatedMouseMotion;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The explorer's systems; the app inserts [`Explorer`] and [`SceneArgs`],
/// and spawns an [`ExplorerCamera`] (and, with a window, [`hud`]).
pub struct ExplorerPlugin;

impl Plugin for ExplorerPlugin {
    fn build(&self, app: &mut App) {
        app.init_resource::<HeadlessRun>()
            .add_systems(Update, (fly, keys, show_hud, draw_frozen_frustum));
    }
}

/// The camera the explorer flies and the keys act on.
#[derive(Component)]
pub struct ExplorerCamera;

/// The explorer's state: the automatic flight around a circle of radius
/// `orbit`, or the keys' (`yaw`, `pitch`), and the levels `N` toggles.
#[derive(Resource)]
pub struct Explorer {
    pub auto: bool,
    pub orbit: f32,
    pub levels: Option<GpuCullLod>,
    t: f32,
    yaw: f32,
    pitch: f32,
}

impl Explorer {
    /// Flying on its own around a circle of radius `orbit`; `N` toggles
    /// `levels` on the batch.
    pub fn new(orbit: f32, levels: Option<GpuCullLod>) -> Self {
        Self {
            auto: true,
            orbit,
            levels,
            t: 0.0,
            yaw: 0.0,
            pitch: -0.25,
        }
    }
}

/// The automatic flight follows a circle across the field, looking ahead,
/// so most spheres are behind or beside the camera. Headless, it moves by
/// frame, not by time, and holds still before the scene is ready and at the
/// end ([`HeadlessRun::camera_still`]), so that every run sees the same.
fn fly(
    mut fly: ResMut<Explorer>,
    args: Res<SceneArgs>,
    run: Res<HeadlessRun>,
    time: Res<Time>,
    keys: Res<ButtonInput<KeyCode>>,
    mouse: Res<ButtonInput<MouseButton>>,
    motion: Res<AccumulatedMouseMotion>,
    mut camera: Query<&mut Transform, With<ExplorerCamera>>,
) {
    let Ok(mut transform) = camera.single_mut() else {
        return;
    };
    if fly.auto {
        fly.t += match args.headless {
            true if run.camera_still(&args) => 0.0,
            true => 0.01,
            false => time.delta_secs() * 0.05,
        };
        let at = Vec3::new(fly.orbit * fly.t.cos(), 10.0, fly.orbit * fly.t.sin());
        let ahead = Vec3::new(-fly.t.sin(), -0.15, fly.t.cos());
        *transform = Transform::from_translation(at).looking_to(ahead, Vec3::Y);
        return;
    }
    if mouse.pressed(MouseButton::Right) {
        fly.yaw -= motion.delta.x * 0.003;
        fly.pitch = (fly.pitch - motion.delta.y * 0.003).clamp(-1.5, 1.5);
    }
    transform.rotation = Quat::from_euler(EulerRot::YXZ, fly.yaw, fly.pitch, 0.0);
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
    mut fly: ResMut<Explorer>,
    mut commands: Commands,
    camera: Query<(Entity, &Camera, &GlobalTransform, Has<GpuCullFrustumOverride>), With<ExplorerCamera>>,
    occluding: Query<(), (With<ExplorerCamera>, With<GpuCullOcclusion>)>,
) {
    let Ok((camera, cam, transform, frozen)) = camera.single() else {
        return;
    };
    // Bevy's path (`--compare bevy`) has no batch: the keys for it do
    // nothing. `O` works there too: `GpuCullOcclusion` brings Bevy's
    // occlusion culling, which stays once added (so does the prepass).
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
        match &fly.levels {
            _ if has_levels => _ = commands.entity(batch).remove::<GpuCullLod>(),
            Some(levels) => _ = commands.entity(batch).insert(levels.clone()),
            None => {}
        }
    }
    if pressed(KeyCode::KeyL) {
        for mut light in &mut lights {
            light.shadow_maps_enabled = !light.shadow_maps_enabled;
        }
    }
    if pressed(KeyCode::Space) {
        fly.auto = !fly.auto;
        let (yaw, pitch, _) = transform.rotation().to_euler(EulerRot::YXZ);
        (fly.yaw, fly.pitch) = (yaw, pitch);
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
