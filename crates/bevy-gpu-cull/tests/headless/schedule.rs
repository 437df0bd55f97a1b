//! The plugin's render systems hold none of Bevy's back: an exclusive
//! system (or a sync point of its own) in Bevy's `Render` schedule waits
//! until every other system of its stage is done and runs alone, which
//! costs a frame whose time is the render thread's chain of systems.

use crate::harness::*;
use bevy::ecs::schedule::Schedules;
use bevy::prelude::*;

/// How many systems of the app's `Render` schedule are exclusive (Bevy's
/// sync points among them), once it has run.
fn exclusive_render_systems(app: &mut App) -> usize {
    for _ in 0..3 {
        app.update();
    }
    let render = app.get_sub_app(bevy::render::RenderApp).expect("a render app");
    let schedules = render.world().resource::<Schedules>();
    let schedule = schedules.get(bevy::render::Render).expect("the Render schedule");
    let systems = schedule.systems().expect("the Render schedule has run");
    systems.filter(|(_, system)| system.is_exclusive()).count()
}

#[test]
fn the_plugin_adds_no_exclusive_render_system() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let with_plugin = exclusive_render_systems(&mut h.app);
    let mut bevy_alone = App::new();
    bevy_alone.add_plugins(
        DefaultPlugins
            .set(bevy::window::WindowPlugin {
                primary_window: None,
                exit_condition: bevy::window::ExitCondition::DontExit,
                ..default()
            })
            .disable::<bevy::log::LogPlugin>()
            .disable::<bevy::winit::WinitPlugin>()
            .disable::<bevy::render::pipelined_rendering::PipelinedRenderingPlugin>(),
    );
    bevy_alone.finish();
    bevy_alone.cleanup();
    let without = exclusive_render_systems(&mut bevy_alone);
    assert!(without > 0, "Bevy's Render schedule has sync points of its own");
    assert_eq!(
        with_plugin,
        without,
        "the plugin adds {} exclusive systems or sync points to Bevy's Render schedule",
        with_plugin as i64 - without as i64
    );
}
