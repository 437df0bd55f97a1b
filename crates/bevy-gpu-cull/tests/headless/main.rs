//! The plugin in a headless app on the adapter Bevy finds (lavapipe on
//! machines without a GPU): visible counts equal the CPU reference per
//! camera, pixels are covered where instances are and background elsewhere,
//! counts follow edits, and empty batches draw nothing.

#[path = "../common/mod.rs"]
mod common;

mod backends;
mod cells;
mod counts;
mod gpu_writes;
mod harness;
mod lod;
mod materials;
mod motion;
mod occlusion;
mod picking;
mod prepass;
mod shadows;
mod soak;
