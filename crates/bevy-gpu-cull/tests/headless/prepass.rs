//! Bevy's prepasses: the depth prepass holds the instances, a deferred
//! camera draws a forward batch, and Bevy's occlusion culling keeps the batch.

use crate::harness::*;
use bevy::prelude::*;

/// Issue 16: a camera with `DepthPrepass` has the instances in its prepass:
/// the prepass depth (reverse-Z, cleared to 0) is set where the frame shows
/// instances.
#[test]
fn depth_prepass_holds_the_instances() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    let camera = h.cameras[0];
    h.app
        .world_mut()
        .entity_mut(camera)
        .insert(bevy::core_pipeline::prepass::DepthPrepass);
    record_render_errors(&mut h.app);
    let probe = install_depth_probe(&mut h);
    run_until_counts_match(&mut h, "with a depth prepass");
    let frame = assert_renders(&mut h, "with a depth prepass");
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let shown: Vec<usize> = frame
        .chunks(4)
        .enumerate()
        .filter(|(_, p)| is_instance(p))
        .map(|(i, _)| i)
        .collect();
    let depth = prepass_depth(&h, &probe);
    let in_prepass = shown.iter().filter(|&&i| depth[i] > 0.0).count();
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
    assert!(
        shown.len() > 50 && in_prepass * 10 >= shown.len() * 9,
        "{in_prepass} of {} instance pixels have prepass depth",
        shown.len()
    );
}

/// Issue 16: with Bevy's occlusion culling on a camera (which needs its
/// depth prepass), the batch is still culled by the plugin, drawn, and
/// written to the prepass depth Bevy builds its occlusion pyramid from; no
/// render error.
#[test]
fn bevy_occlusion_culling_keeps_the_batch() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    h.app.world_mut().entity_mut(h.cameras[0]).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::render::occlusion_culling::OcclusionCulling,
    ));
    run_until_counts_match(&mut h, "with occlusion culling");
    assert_renders(&mut h, "with occlusion culling");
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}

/// A deferred camera draws a batch whose material renders forward (the
/// default) in its forward passes, as it draws such a mesh, with no render
/// error. (A deferred material's batch goes into the G-buffer: like_bevy.)
#[test]
fn a_deferred_camera_draws_a_forward_batch_in_the_forward_passes() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    record_render_errors(&mut h.app);
    h.app.world_mut().entity_mut(h.cameras[0]).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::core_pipeline::prepass::DeferredPrepass,
    ));
    run_until_counts_match(&mut h, "with a deferred camera");
    assert_renders(&mut h, "with a deferred camera");
    let errors = render_errors(&h.app);
    assert!(errors.is_empty(), "render errors: {errors:#?}");
}
