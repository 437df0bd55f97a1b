//! What the explorer example shows: a HUD with the counts, the
//! settings and the keys, and the frozen culling frustum.

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

use super::SceneArgs;
use super::fly_over::{FlyOver, FlyOverCamera};
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The HUD's text entity.
#[derive(Component)]
pub(super) struct Hud;

/// The HUD's text, top left.
pub fn hud() -> impl Bundle {
    (
        Text::new(""),
        TextFont {
            font_size: FontSize::Px(16.0),
            ..default()
        },
        Node {
            position_type: PositionType::Absolute,
            top: Val::Px(8.0),
            left: Val::Px(8.0),
            ..default()
        },
        Hud,
    )
}

/// The frozen culling frustum (`C`), drawn as lines.
pub(super) fn draw_frozen_frustum(
    mut gizmos: Gizmos,
    camera: Query<&GpuCullFrustumOverride, With<FlyOverCamera>>,
) {
    let Ok(frozen) = camera.single() else {
        return;
    };
    let world_from_clip = frozen.clip_from_world.inverse();
    // Reverse-Z: depth 1 is the near plane; 0.002 is far out (the far plane
    // is at infinity).
    let corners = |z: f32| {
        [(-1., -1.), (1., -1.), (1., 1.), (-1., 1.)]
            .map(|(x, y)| world_from_clip.project_point3(Vec3::new(x, y, z)))
    };
    let (near, far) = (corners(1.0), corners(0.002));
    let color = Color::srgb(1.0, 0.9, 0.2);
    for i in 0..4 {
        gizmos.line(near[i], near[(i + 1) % 4], color);
        gizmos.line(far[i], far[(i + 1) % 4], color);
        gizmos.line(near[i], far[i], color);
    }
}

/// What the HUD says: the counts, the settings, the keys.
pub(super) fn show_hud(
    args: Res<SceneArgs>,
    stats: Res<GpuCullStats>,
    settings: Res<GpuCullSettings>,
    time: Res<Time>,
    flight: Res<FlyOver>,
    frozen: Query<(), (With<FlyOverCamera>, With<GpuCullFrustumOverride>)>,
    lights: Query<&DirectionalLight>,
    mut text: Query<&mut Text, With<Hud>>,
    with_levels: Query<(), With<GpuCullLod>>,
    occluding: Query<(), (With<FlyOverCamera>, With<GpuCullOcclusion>)>,
) {
    let Ok(mut text) = text.single_mut() else {
        return;
    };
    let frame_ms = time.delta_secs_f64() * 1e3;
    let on = |yes: bool| if yes { "on" } else { "off" };
    let visible: u32 = stats.visible.values().sum();
    let levels = (stats.visible_per_level.values().next())
        .filter(|_| !with_levels.is_empty())
        .map_or(String::new(), |l| format!(" (per level {l:?})"));
    let cells = stats.cells.values().next().map_or(String::new(), |c| {
        let flat = if c.by_cells { "" } else { " (culled flat)" };
        format!(" | cells kept {} / {}{flat}", c.kept, c.cells)
    });
    **text = format!(
        "visible {visible}{levels}{cells} / {} | variant {} | format {} | GPU cull {} | \
         frame {frame_ms:.2} ms\n\
         [V] variant  [F] format  [L] shadows {}  [N] levels of detail {}  [O] occlusion culling {}  \
         [C] freeze culling{}  [Space] auto fly {}  [WASDQE + right drag] fly",
        args.count,
        stats.variant.map_or("-", |v| v.name()),
        settings.format.name(),
        stats.gpu_time_ms.map_or("n/a".into(), |ms| format!("{ms:.3} ms")),
        on(lights.iter().any(|l| l.shadow_maps_enabled)),
        on(!with_levels.is_empty()),
        on(!occluding.is_empty()),
        if frozen.is_empty() { "" } else { " (frozen)" },
        on(flight.on),
    );
}
