//! What the examples share: a window or a headless run (no display, the
//! frames rendered to an image), and the `--size WxH` argument.

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::prelude::*;
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy::window::ExitCondition;
use bevy::winit::WinitPlugin;
use std::time::Duration;

/// Parses `WxH`.
pub fn parse_size(value: &str) -> Option<(u32, u32)> {
    let (w, h) = value.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

/// Exits with a message pointing to `headless_command` when a window is
/// asked for and there is no display.
pub fn require_display(name: &str, headless_command: &str) {
    let has_display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !has_display {
        eprintln!(
            "{name}: no display found (DISPLAY and WAYLAND_DISPLAY are unset).\n\
             Run it headless instead: {headless_command}"
        );
        std::process::exit(2);
    }
}

/// Bevy's default plugins: a window titled `title`, or headless (no window,
/// no winit, frames as fast as they come).
pub fn add_default_plugins(app: &mut App, headless: bool, title: &str, width: u32, height: u32) {
    if headless {
        app.add_plugins((
            DefaultPlugins
                .set(WindowPlugin {
                    primary_window: None,
                    exit_condition: ExitCondition::DontExit,
                    ..default()
                })
                .disable::<WinitPlugin>(),
            ScheduleRunnerPlugin::run_loop(Duration::ZERO),
        ));
    } else {
        app.add_plugins(DefaultPlugins.set(WindowPlugin {
            primary_window: Some(Window {
                title: title.into(),
                resolution: (width, height).into(),
                ..default()
            }),
            ..default()
        }));
    }
}

/// A headless camera's target: an image that screenshots can read, and no
/// MSAA (lavapipe renders every sample on the CPU).
pub fn headless_target(images: &mut Assets<Image>, width: u32, height: u32) -> (RenderTarget, Msaa) {
    let mut image = Image::new_target_texture(width, height, TextureFormat::Rgba8UnormSrgb, None);
    image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
    (
        RenderTarget::Image(ImageRenderTarget {
            handle: images.add(image),
            scale_factor: 1.0,
        }),
        Msaa::Off,
    )
}
