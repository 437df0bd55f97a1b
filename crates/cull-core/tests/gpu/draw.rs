//! Drawing the survivors with the crate's helpers: each format's
//! instances, culled with instance output, bound as per-instance vertices
//! (`InstanceFormat::vertex_layout`, `CullTarget::bind_view_instances`) and
//! drawn indirectly (`CullTarget::draw_view`), light exactly the pixels of
//! the instances the CPU reference keeps.

use crate::harness::gpu;
use cull_core::{CullInput, CullRequest, CullTarget, Frustum, Instance, InstanceFormat, OutputKind, Sphere};
use glam::{Mat4, Vec3};

/// The image: one pixel per instance.
const SIDE: u32 = 64;

/// Each instance is a point at the pixel its position names (x, y in
/// pixels), whatever the format: the translation is the matrix's fourth
/// column, the first attribute of the others.
fn shader(format: InstanceFormat) -> String {
    let (inputs, position) = match format {
        InstanceFormat::Matrix => (
            "@location(0) c0: vec4<f32>, @location(1) c1: vec4<f32>, @location(2) c2: vec4<f32>, @location(3) t: vec4<f32>",
            "t.xy",
        ),
        InstanceFormat::PosQuat => ("@location(0) p: vec4<f32>, @location(1) q: vec4<f32>", "p.xy"),
        InstanceFormat::Packed16 => ("@location(0) p: vec3<f32>, @location(1) q: u32", "p.xy"),
    };
    format!(
        "@vertex fn vs({inputs}) -> @builtin(position) vec4<f32> {{
    let pixel = {position} + vec2<f32>(0.5);
    return vec4<f32>(pixel.x / {SIDE}.0 * 2.0 - 1.0, 1.0 - pixel.y / {SIDE}.0 * 2.0, 0.5, 1.0);
}}
@fragment fn fs() -> @location(0) vec4<f32> {{ return vec4<f32>(1.0); }}"
    )
}

/// The pixels `format`'s survivors light, as instance indices (y * SIDE + x).
fn drawn(format: InstanceFormat, instances: &[Instance], frustum: &Frustum, bounds: Sphere) -> Vec<u32> {
    let ctx = gpu();
    let device = &ctx.device;
    let culler = crate::harness::culler(
        ctx,
        cull_core::ScanVariant::best_available(device.features()).expect("a variant runs here"),
        format,
        OutputKind::Instances,
        Default::default(),
    );
    let n = instances.len() as u32;
    let input = CullInput::new(device, format, n).unwrap();
    input.write_instances(&ctx.queue, 0, instances).unwrap();
    let target = CullTarget::new(device, &culler, n).unwrap();
    target.set_draw(
        &ctx.queue,
        wgpu::util::DrawIndirectArgs {
            vertex_count: 1,
            ..Default::default()
        },
    );
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("draw_test"),
        source: wgpu::ShaderSource::Wgsl(shader(format).into()),
    });
    let attributes = format.vertex_attributes(0);
    let pipeline = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some("draw_test"),
        layout: None,
        vertex: wgpu::VertexState {
            module: &module,
            entry_point: Some("vs"),
            compilation_options: Default::default(),
            buffers: &[format.vertex_layout(&attributes)],
        },
        primitive: wgpu::PrimitiveState {
            topology: wgpu::PrimitiveTopology::PointList,
            ..Default::default()
        },
        depth_stencil: None,
        multisample: Default::default(),
        fragment: Some(wgpu::FragmentState {
            module: &module,
            entry_point: Some("fs"),
            compilation_options: Default::default(),
            targets: &[Some(wgpu::TextureFormat::R8Unorm.into())],
        }),
        multiview_mask: None,
        cache: None,
    });
    let texture = device.create_texture(&wgpu::TextureDescriptor {
        label: Some("draw_test"),
        size: wgpu::Extent3d {
            width: SIDE,
            height: SIDE,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::R8Unorm,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        view_formats: &[],
    });
    let view = texture.create_view(&Default::default());
    // Rows of a texture copy are 256-byte aligned: SIDE bytes padded.
    let row = 256;
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("draw_test_readback"),
        size: (row * SIDE) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    let request = CullRequest::new(&input, &target, std::slice::from_ref(frustum), bounds, n);
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    {
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("draw_test"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations {
                    load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                    store: wgpu::StoreOp::Store,
                },
            })],
            ..Default::default()
        });
        pass.set_pipeline(&pipeline);
        target.bind_view_instances(&mut pass, 0, 0);
        target.draw_view(&mut pass, 0);
    }
    encoder.copy_texture_to_buffer(
        texture.as_image_copy(),
        wgpu::TexelCopyBufferInfo {
            buffer: &readback,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row),
                rows_per_image: None,
            },
        },
        texture.size(),
    );
    ctx.queue.submit([encoder.finish()]);
    readback.slice(..).map_async(wgpu::MapMode::Read, |r| r.unwrap());
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let bytes = readback.slice(..).get_mapped_range().to_vec();
    (0..SIDE * SIDE)
        .filter(|&i| bytes[((i / SIDE) * row + i % SIDE) as usize] > 0)
        .collect()
}

#[test]
fn every_format_draws_its_survivors_through_the_vertex_layout_and_draw_helpers() {
    // An instance per pixel, at z from -1 to -9 by a hash of its index; a
    // view of the nearer ones (z > -5) over the whole image.
    let instances: Vec<Instance> = (0..SIDE * SIDE)
        .map(|i| {
            let depth = 1.0 + (i.wrapping_mul(2_654_435_761) >> 24) as f32 / 255.0 * 8.0;
            Instance {
                rotation: glam::Quat::from_rotation_y(i as f32 * 0.1),
                ..Instance::from_position(Vec3::new((i % SIDE) as f32, (i / SIDE) as f32, -depth))
            }
        })
        .collect();
    let view = Mat4::orthographic_rh(-1.0, SIDE as f32 + 1.0, -1.0, SIDE as f32 + 1.0, 0.0, 5.0);
    let frustum = Frustum::from_clip_from_world(view, None).unwrap();
    let bounds = Sphere::new(Vec3::ZERO, 0.01);
    for format in InstanceFormat::ALL {
        let bytes = format.encode(&instances).unwrap();
        let expected = cull_core::cpu::cull(format, &bytes, bounds, &frustum).unwrap();
        assert!(
            expected.len() > 1_000 && expected.len() < instances.len() - 1_000,
            "the view keeps {} of {}",
            expected.len(),
            instances.len()
        );
        let lit = drawn(format, &instances, &frustum, bounds);
        assert_eq!(
            lit, expected,
            "{format:?}: the pixels drawn are not the survivors"
        );
    }
}
