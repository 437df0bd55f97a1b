//! Bad input gets a typed error, never a panic inside wgpu or an overrun.

use crate::harness::*;
use cull_core::{CullError, CullInput, CullParams, CullTarget, Frustum, InstanceFormat, ScanVariant, Sphere};
use glam::Mat4;

fn params(count: u32) -> CullParams {
    CullParams {
        frustum: Frustum::from_clip_from_world(Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1), None)
            .unwrap(),
        local_bounds: Sphere::new(glam::Vec3::ZERO, 1.0),
        count,
    }
}

#[test]
fn count_over_capacity_is_an_error() {
    let ctx = gpu();
    let variant = variants(ctx)[0];
    let culler = posquat_culler(ctx, variant);
    let input = CullInput::new(&ctx.device, InstanceFormat::PosQuat, 100).unwrap();
    let target = CullTarget::new(&ctx.device, &culler, 50).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    for count in [51, 101, u32::MAX] {
        let err = culler
            .cull(&mut encoder, &ctx.queue, &input, &target, &params(count))
            .unwrap_err();
        assert!(matches!(err, CullError::CountExceedsCapacity { .. }), "{err}");
    }
    culler
        .cull(&mut encoder, &ctx.queue, &input, &target, &params(50))
        .unwrap();
    ctx.queue.submit([encoder.finish()]);
}

#[test]
fn zero_capacity_is_an_error() {
    let ctx = gpu();
    let culler = posquat_culler(ctx, variants(ctx)[0]);
    assert!(matches!(
        CullInput::new(&ctx.device, InstanceFormat::PosQuat, 0),
        Err(CullError::ZeroCapacity)
    ));
    assert!(matches!(
        CullTarget::new(&ctx.device, &culler, 0),
        Err(CullError::ZeroCapacity)
    ));
}

#[test]
fn wrong_buffers_are_errors() {
    let ctx = gpu();
    let buffer = |size, usage| {
        ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let storage = wgpu::BufferUsages::STORAGE;
    let err = CullInput::from_buffer(buffer(100, storage), InstanceFormat::PosQuat).unwrap_err();
    assert!(
        matches!(
            err,
            CullError::BufferSize {
                size: 100,
                stride: 32
            }
        ),
        "{err}"
    );
    let err =
        CullInput::from_buffer(buffer(128, wgpu::BufferUsages::VERTEX), InstanceFormat::PosQuat).unwrap_err();
    assert!(matches!(err, CullError::BufferUsage(_)), "{err}");
    let input = CullInput::from_buffer(
        buffer(128, storage | wgpu::BufferUsages::COPY_DST),
        InstanceFormat::Packed16,
    )
    .unwrap();
    assert_eq!(input.capacity(), 8);
    // Writes must be whole instances inside the buffer.
    assert!(matches!(
        input.write(&ctx.queue, 0, &[0u8; 15]),
        Err(CullError::WriteOutOfRange { .. })
    ));
    assert!(matches!(
        input.write(&ctx.queue, 7, &[0u8; 32]),
        Err(CullError::WriteOutOfRange { .. })
    ));
    input.write(&ctx.queue, 6, &[0u8; 32]).unwrap();
}

#[test]
fn mismatched_format_and_foreign_target_are_errors() {
    let ctx = gpu();
    let v = variants(ctx)[0];
    let a = posquat_culler(ctx, v);
    let b = posquat_culler(ctx, v);
    let input = CullInput::new(&ctx.device, InstanceFormat::Matrix, 10).unwrap();
    let target = CullTarget::new(&ctx.device, &a, 10).unwrap();
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let err = a
        .cull(&mut encoder, &ctx.queue, &input, &target, &params(1))
        .unwrap_err();
    assert!(matches!(err, CullError::FormatMismatch { .. }), "{err}");
    let input = CullInput::new(&ctx.device, InstanceFormat::PosQuat, 10).unwrap();
    let err = b
        .cull(&mut encoder, &ctx.queue, &input, &target, &params(1))
        .unwrap_err();
    assert!(matches!(err, CullError::ForeignTarget), "{err}");
}

#[test]
fn zero_instances_give_a_zero_count() {
    let ctx = gpu();
    for variant in variants(ctx) {
        let culler = posquat_culler(ctx, variant);
        let input = CullInput::new(&ctx.device, InstanceFormat::PosQuat, 10).unwrap();
        let target = CullTarget::new(&ctx.device, &culler, 10).unwrap();
        // A stale count from an earlier cull must be reset.
        ctx.queue.write_buffer(target.draw_args(), 4, &7u32.to_le_bytes());
        target.set_indexed_draw(&ctx.queue, 36, 1, -2, 3);
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        culler
            .cull(&mut encoder, &ctx.queue, &input, &target, &params(0))
            .unwrap();
        ctx.queue.submit([encoder.finish()]);
        assert_eq!(
            target.read_visible_count(&ctx.device, &ctx.queue).unwrap(),
            0,
            "{variant:?}"
        );
        let args = cull_core::buffers::read_back(&ctx.device, &ctx.queue, target.draw_args(), 0, 20).unwrap();
        let args: Vec<u32> = bytemuck::pod_collect_to_vec(&args);
        assert_eq!(
            args,
            [36, 0, 1, (-2i32) as u32, 3],
            "caller's fields kept, instance_count written"
        );
    }
}

#[test]
fn compiled_out_or_unsupported_variants_are_refused() {
    let ctx = gpu();
    for variant in ScanVariant::ALL {
        let desc = cull_core::CullerDesc {
            variant: Some(variant),
            allow_fallback: false,
            ..Default::default()
        };
        let result = cull_core::Culler::new(&ctx.device, &ctx.queue, &desc);
        match (variant.is_compiled(), variant.is_available(ctx.device.features())) {
            (false, _) => assert!(matches!(result, Err(CullError::VariantNotCompiled { .. }))),
            (true, false) => assert!(matches!(result, Err(CullError::MissingFeature { .. }))),
            (true, true) => assert_eq!(result.unwrap().variant(), variant),
        }
    }
}
