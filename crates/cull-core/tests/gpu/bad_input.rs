//! Bad input gets a typed error, never a panic inside wgpu or an overrun.

use crate::harness::*;
use cull_core::{
    CullError, CullInput, CullRequest, CullTarget, Frustum, InstanceFormat, OutputKind, ScanVariant, Sphere,
};
use glam::Mat4;

/// What one plain cull here culls: `count` instances of `local_bounds`
/// against `frustum`.
struct Params {
    frustum: Frustum,
    local_bounds: Sphere,
    count: u32,
}

impl Params {
    /// The plain cull of these parameters from `input` into `target`.
    fn request<'a>(&'a self, input: &'a CullInput, target: &'a CullTarget) -> CullRequest<'a> {
        CullRequest::new(
            input,
            target,
            std::slice::from_ref(&self.frustum),
            self.local_bounds,
            self.count,
        )
    }
}

fn params(count: u32) -> Params {
    Params {
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
            .cull(&mut encoder, &ctx.queue, params(count).request(&input, &target))
            .unwrap_err();
        assert!(matches!(err, CullError::CountExceedsCapacity { .. }), "{err}");
    }
    culler
        .cull(&mut encoder, &ctx.queue, params(50).request(&input, &target))
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
        .cull(&mut encoder, &ctx.queue, params(1).request(&input, &target))
        .unwrap_err();
    assert!(matches!(err, CullError::FormatMismatch { .. }), "{err}");
    let input = CullInput::new(&ctx.device, InstanceFormat::PosQuat, 10).unwrap();
    let err = b
        .cull(&mut encoder, &ctx.queue, params(1).request(&input, &target))
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
        target.set_indexed_draw(
            &ctx.queue,
            wgpu::util::DrawIndexedIndirectArgs {
                index_count: 36,
                instance_count: 5,
                first_index: 1,
                base_vertex: -2,
                first_instance: 3,
            },
        );
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        culler
            .cull(&mut encoder, &ctx.queue, params(0).request(&input, &target))
            .unwrap();
        ctx.queue.submit([encoder.finish()]);
        assert_eq!(
            target.read_visible_count(&ctx.device, &ctx.queue).unwrap(),
            0,
            "{variant:?}"
        );
        let args = cull_core::read_back(&ctx.device, &ctx.queue, target.draw_args(), 0, 20).unwrap();
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

/// Issue 14, item 7: a local sphere that bounds nothing (negative or
/// non-finite radius, non-finite center) is a typed error, on the GPU path
/// and in the CPU reference alike.
#[test]
fn invalid_bounds_are_an_error() {
    let ctx = gpu();
    let culler = posquat_culler(ctx, variants(ctx)[0]);
    let input = CullInput::new(&ctx.device, InstanceFormat::PosQuat, 4).unwrap();
    let target = CullTarget::new(&ctx.device, &culler, 4).unwrap();
    let bytes = InstanceFormat::PosQuat
        .encode(&[cull_core::Instance::default()])
        .unwrap();
    for bounds in [
        Sphere::new(glam::Vec3::ZERO, -1.0),
        Sphere::new(glam::Vec3::ZERO, f32::INFINITY),
        Sphere::new(glam::Vec3::new(f32::NAN, 0.0, 0.0), 1.0),
    ] {
        let mut encoder = ctx.device.create_command_encoder(&Default::default());
        let err = culler
            .cull(
                &mut encoder,
                &ctx.queue,
                Params {
                    local_bounds: bounds,
                    ..params(1)
                }
                .request(&input, &target),
            )
            .unwrap_err();
        assert!(matches!(err, CullError::InvalidBounds { .. }), "{err}");
        let cpu = cull_core::cpu::classify(InstanceFormat::PosQuat, &bytes, bounds, &params(1).frustum);
        assert!(matches!(cpu, Err(CullError::InvalidBounds { .. })), "{bounds:?}");
    }
}

/// Issue 14, items 7 and 8: instances whose world sphere overflows f32
/// from finite input are kept by the GPU and the CPU reference alike; a
/// sphere whose position cancels a huge rotated offset, tangent to a plane
/// from outside, is kept by both.
#[test]
fn overflow_and_cancellation_agree_with_the_reference() {
    use cull_core::Instance;
    use cull_core::scene::Scene;
    use glam::{Quat, Vec3, Vec4Swizzles};
    let ctx = gpu();
    let clip_from_world = Mat4::perspective_rh(1.0, 1.5, 0.1, 200.0);
    let frustum = Frustum::from_clip_from_world(clip_from_world, None).unwrap();
    for local in [
        Sphere::new(Vec3::new(1.0, 0.5, 0.0), 2.0),
        Sphere::new(Vec3::new(1.0, 0.0, 0.0), 0.0),
    ] {
        for format in InstanceFormat::ALL {
            let scaled = |scale: f32| if format.carries_scale() { scale } else { 1.0 };
            let mut instances = vec![];
            // (index, whether it must be kept or must be culled)
            let mut expected = vec![];
            let mut push = |inst: Instance, keep: bool, list: &mut Vec<Instance>| {
                expected.push((list.len() as u32, keep));
                list.push(inst);
            };
            let at = |position: Vec3, scale: f32| Instance {
                position,
                rotation: Quat::from_rotation_y(0.3),
                scale: scaled(scale),
            };
            // An infinite radius (or 0 * inf) from a finite scale.
            if format.carries_scale() {
                push(at(Vec3::new(0.0, 0.0, -10.0), 2e38), true, &mut instances);
                push(at(Vec3::new(500.0, 0.0, 300.0), 3e38), true, &mut instances);
            }
            // Positions near f32::MAX: |c|₁ overflows, so the margin would be inf - inf.
            push(at(Vec3::new(3e38, 3e38, 0.0), 1.0), true, &mut instances);
            push(at(Vec3::new(-3e38, -3e38, 1.0), 1.0), true, &mut instances);
            // Far but finite: clearly outside.
            push(at(Vec3::new(-3e37, 0.0, 0.0), 1.0), false, &mut instances);
            // Positions cancelling a huge scaled offset, tangent to each plane from outside.
            if format.carries_scale() {
                for plane in frustum.planes() {
                    for scale in [1e5f32, -3e6] {
                        let mut inst = Instance {
                            position: Vec3::new(0.0, 0.0, -50.0),
                            rotation: Quat::from_rotation_z(0.7),
                            scale,
                        };
                        // Move the position so that the exact center sits
                        // -50 along the axis, then tangent to the plane.
                        let offset = (Quat::from_rotation_z(0.7) * local.center) * scale;
                        inst.position -= offset;
                        let s = format
                            .world_sphere(&format.encode(&[inst]).unwrap(), 0, local)
                            .unwrap();
                        let dist = plane.xyz().dot(s.center) + plane.w;
                        inst.position += plane.xyz() * (-s.radius - dist);
                        push(inst, true, &mut instances);
                    }
                }
            }
            let scene = Scene {
                clip_from_world,
                bounds: local,
                instances,
            };
            let reference = reference(&scene, format);
            for (variant, tuning) in forms(ctx) {
                let culler = culler(ctx, variant, format, OutputKind::Indices, tuning);
                let what = format!("{variant:?} ({}) {format:?} {local:?}", form_name(&culler));
                let got = run(ctx, &culler, &scene, scene.instances.len() as u32);
                if let Err(e) = reference.check(&got) {
                    panic!("{what}: {e}");
                }
                for &(i, keep) in &expected {
                    let inst = scene.instances[i as usize];
                    assert_eq!(
                        got.contains(&i),
                        keep,
                        "{what}: instance {i} ({inst:?}) kept: expected {keep}"
                    );
                }
            }
        }
    }
}
