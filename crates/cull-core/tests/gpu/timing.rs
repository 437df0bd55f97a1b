//! Timestamp queries report per-pass GPU time.

use crate::harness::*;
use cull_core::{CullError, InstanceFormat, ScanVariant};

#[test]
fn timings_cover_each_pass() {
    let ctx = gpu();
    if !ctx.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
        panic!("the adapter lacks TIMESTAMP_QUERY; lavapipe has it: is this lavapipe?");
    }
    for variant in variants(ctx) {
        let culler = posquat_culler(ctx, variant);
        let scene = edge_scene(1, 20_000, Camera::Perspective, InstanceFormat::PosQuat);
        let job = Job::new(ctx, &culler, &scene, 20_000);
        job.cull(ctx, &culler);
        let target = &job.target;
        let t = target.read_timings(&ctx.device).unwrap();
        assert!(t.total.as_nanos() > 0, "{variant:?}: {t:?}");
        if variant == ScanVariant::HillisSteele {
            assert!(
                t.vote.is_some() && t.scan.is_some() && t.compact.is_some() && t.fused.is_none(),
                "{t:?}"
            );
        } else {
            assert!(t.fused.is_some() && t.vote.is_none(), "{t:?}");
        }
    }
    let desc = cull_core::CullerDesc {
        timestamps: false,
        ..Default::default()
    };
    let culler = cull_core::Culler::new(&ctx.device, &ctx.queue, &desc).unwrap();
    let target = cull_core::CullTarget::new(&ctx.device, &culler, 10).unwrap();
    assert!(matches!(
        target.read_timings(&ctx.device),
        Err(CullError::TimingsUnavailable)
    ));
}

#[test]
fn timings_can_be_polled_without_blocking() {
    let ctx = gpu();
    let variant = variants(ctx)[0];
    let culler = posquat_culler(ctx, variant);
    let scene = edge_scene(2, 5_000, Camera::InfiniteReverseZ, InstanceFormat::PosQuat);
    let job = Job::new(ctx, &culler, &scene, 5_000);
    let mut timed = 0;
    // A frame loop: cull every frame, poll the device without waiting, and
    // take timings whenever they have arrived.
    for _ in 0..200 {
        job.cull(ctx, &culler);
        if let Some(t) = job.target.poll_timings() {
            assert!(t.total.as_nanos() > 0, "{t:?}");
            timed += 1;
        }
        ctx.device.poll(wgpu::PollType::Poll).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(timed > 5, "only {timed} of 200 culls were timed");
}
