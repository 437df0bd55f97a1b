//! The plugin in a headless app on the adapter Bevy finds (lavapipe on
//! machines without a GPU): visible counts equal the CPU reference per
//! camera, pixels are covered where instances are and background elsewhere,
//! counts follow edits, and empty batches draw nothing.
//!
//! Tests run side by side (libtest's threads, one per core): an app keeps
//! about one core busy, lavapipe running its queue on one thread. libtest
//! starts tests in name order, so the longest (`churn`) starts among the
//! first.

#[path = "../common/mod.rs"]
mod common;

mod backends;
mod cells;
mod churn;
mod counts;
mod draw_order;
mod gpu_writes;
mod harness;
mod lod;
mod materials;
mod merged;
mod motion;
mod occlusion;
mod opaque_pass;
mod picking;
mod prepass;
mod schedule;
mod shadows;
