//! What the examples share: the app around a scene (a window, or headless:
//! no display, frames rendered to an image and paced), what their flags
//! parse into, a headless run's bookkeeping and summary, and two scenes'
//! worth of parts (the spheres' field and levels of detail, the flight
//! over it, the explorer's keys). Each example uses part of it.
// Bevy systems take many parameters by design.
#![allow(dead_code, unused_imports, clippy::too_many_arguments)]

mod app;
mod args;
pub mod explorer;
mod explorer_hud;
mod finish;
pub mod fly_over;
mod headless;
mod pass_times;
pub mod reference;
mod render_stages;
pub mod scenery;
mod settled;
pub mod sphere_levels;
pub mod sphere_scene;
mod summary;
mod untimed_spans;

pub use app::*;
pub use args::*;
pub use finish::*;
pub use headless::*;
pub use pass_times::*;
pub use render_stages::*;
pub use settled::*;
pub use summary::*;
pub use untimed_spans::*;
