//! `cull::encode`, the GPU's writer of instances: a compute pass of the
//! test's own encodes random transforms (edge cases included) into each
//! format's bytes, which match the CPU's `InstanceFormat::encode` and decode
//! back to the transforms (`decode_instance`), and every variant culls the
//! bytes read back exactly as the CPU reference does.

use crate::harness::{Camera, assert_exact, edge_scene, forms, gpu, survivors_as_indices};
use cull_core::scene::Scene;
use cull_core::{CullInput, CullRequest, CullTarget, GpuContext, InstanceFormat, OutputKind};
use naga_oil::compose::{ComposableModuleDescriptor, Composer, NagaModuleDescriptor};
use wgpu::util::DeviceExt;

/// The test's pass: instance `i` of `records` (position and scale, then the
/// rotation) written by `encode_instance` into `out`.
const ENTRY: &str = "#import cull::encode::{encode_instance, decode_instance}
struct Job { count: u32, format: u32, parts: u32, _pad: u32 }
@group(0) @binding(0) var<storage, read> records: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> job: Job;
@group(0) @binding(3) var<storage, read_write> decoded: array<vec4<f32>>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= job.count { return; }
    let p = records[2u * i];
    let e = encode_instance(job.format, p.xyz, p.w, records[2u * i + 1u]);
    for (var k = 0u; k < e.count; k++) { out[i * job.parts + k] = e.parts[k]; }
    let d = decode_instance(job.format, e.parts);
    decoded[2u * i] = vec4<f32>(d.position, d.scale);
    decoded[2u * i + 1u] = d.rotation;
}";

/// The test pass's pipeline, composed from cull-core's library by naga_oil.
fn pipeline(ctx: &GpuContext) -> wgpu::ComputePipeline {
    let mut composer = Composer::default();
    for module in cull_core::shader::library()
        .into_iter()
        .filter(|m| matches!(m.import_path(), Some("cull::math" | "cull::encode")))
    {
        let added = composer.add_composable_module(ComposableModuleDescriptor {
            source: module.source,
            file_path: module.path,
            ..Default::default()
        });
        if let Err(e) = added {
            panic!("{}", e.emit_to_string(&composer));
        }
    }
    let made = composer.make_naga_module(NagaModuleDescriptor {
        source: ENTRY,
        file_path: "encode_test.wgsl",
        ..Default::default()
    });
    let module = made.unwrap_or_else(|e| panic!("{}", e.emit_to_string(&composer)));
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), Default::default())
        .validate(&module)
        .unwrap();
    let wgsl =
        naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty()).unwrap();
    let shader = ctx.device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("encode_test"),
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    ctx.device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("encode_test"),
            layout: None,
            module: &shader,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        })
}

/// `scene`'s instances encoded on the GPU into a cull input of `format`,
/// and those bytes read back.
fn encode_on_gpu(
    ctx: &GpuContext,
    pipeline: &wgpu::ComputePipeline,
    scene: &Scene,
    format: InstanceFormat,
) -> (CullInput, Vec<u8>, Vec<[f32; 4]>) {
    let n = scene.instances.len() as u32;
    let records: Vec<[f32; 4]> = scene
        .instances
        .iter()
        .flat_map(|i| [i.position.extend(i.scale).to_array(), i.rotation.to_array()])
        .chain(std::iter::once([0.0; 4]))
        .collect();
    let device = &ctx.device;
    let records = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("records"),
        contents: bytemuck::cast_slice(&records),
        usage: wgpu::BufferUsages::STORAGE,
    });
    let parts = (format.stride() / 16) as u32;
    let job = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("job"),
        contents: bytemuck::cast_slice(&[n, format.encode_id(), parts, 0]),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let size = n.max(1) as u64 * format.stride();
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("encoded"),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("encoded_readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let decoded_size = 32 * n.max(1) as u64;
    let decoded = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("decoded"),
        size: decoded_size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let decoded_readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("decoded_readback"),
        size: decoded_size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: records.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: out.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: job.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: decoded.as_entire_binding(),
            },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(n.div_ceil(64).max(1), 1, 1);
    }
    encoder.copy_buffer_to_buffer(&out, 0, &readback, 0, size);
    encoder.copy_buffer_to_buffer(&decoded, 0, &decoded_readback, 0, decoded_size);
    ctx.queue.submit([encoder.finish()]);
    readback.slice(..).map_async(wgpu::MapMode::Read, |r| r.unwrap());
    decoded_readback
        .slice(..)
        .map_async(wgpu::MapMode::Read, |r| r.unwrap());
    device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    let bytes = readback.slice(..).get_mapped_range()[..(n as u64 * format.stride()) as usize].to_vec();
    let decoded = bytemuck::pod_collect_to_vec(&decoded_readback.slice(..).get_mapped_range()[..]);
    (CullInput::from_buffer(out, format).unwrap(), bytes, decoded)
}

/// The scene with rotations the CPU normalizes too: some far longer than
/// one, some far shorter, some zero (culled).
fn scene_with_long_rotations(seed: u64, count: usize, format: InstanceFormat) -> Scene {
    let mut scene = edge_scene(
        seed,
        count,
        Camera::ALL[seed as usize % Camera::ALL.len()],
        format,
    );
    for (i, inst) in scene.instances.iter_mut().enumerate() {
        match i % 43 {
            1 => inst.rotation *= 1.0e30,
            2 => inst.rotation *= 1.0e-30,
            4 => inst.rotation = glam::Quat::from_xyzw(0.0, 0.0, 0.0, 0.0),
            _ => {}
        }
    }
    scene
}

/// Instance `i` of `gpu` against the CPU's bytes `cpu`: culled alike, and
/// the same transform up to the rounding of f32 normalization (one step of
/// a packed component).
fn assert_encoded_alike(format: InstanceFormat, i: usize, gpu: &[u8], cpu: &[u8], what: &str) {
    let bounds = cull_core::Sphere::new(glam::Vec3::ZERO, 1.0);
    let (g, c) = (
        format.world_sphere(gpu, i, bounds),
        format.world_sphere(cpu, i, bounds),
    );
    assert_eq!(
        g.is_some(),
        c.is_some(),
        "{what}: instance {i} culled on one side only"
    );
    if c.is_none() {
        return;
    }
    let stride = format.stride() as usize;
    let (g, c) = (&gpu[i * stride..][..stride], &cpu[i * stride..][..stride]);
    if format == InstanceFormat::Packed16 {
        assert_eq!(g[..12], c[..12], "{what}: instance {i}'s position");
        let (gr, cr) = (
            u32::from_le_bytes(g[12..16].try_into().unwrap()),
            u32::from_le_bytes(c[12..16].try_into().unwrap()),
        );
        let close = gr >> 30 == cr >> 30
            && [20, 10, 0]
                .iter()
                .all(|s| ((gr >> s) & 1023).abs_diff((cr >> s) & 1023) <= 1);
        assert!(close, "{what}: instance {i}'s rotation {gr:#x}, CPU {cr:#x}");
        return;
    }
    let (g, c): (Vec<f32>, Vec<f32>) = (bytemuck::pod_collect_to_vec(g), bytemuck::pod_collect_to_vec(c));
    let scale = c.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (k, (a, b)) in g.iter().zip(&c).enumerate() {
        assert!(
            (a - b).abs() <= 4.0e-7 * scale,
            "{what}: instance {i} word {k}: {a} on the GPU, {b} on the CPU"
        );
    }
}

/// `decode_instance` of an instance's parts gives back its transform:
/// the position, the scale (1 in the packed format; a matrix's for a
/// positive scale) and the rotation, up to the sign of a quaternion and
/// the packed format's quantization.
fn assert_decoded(
    format: InstanceFormat,
    instance: &cull_core::Instance,
    decoded: &[[f32; 4]],
    what: &str,
    i: usize,
) {
    let unit = instance.normalized();
    let drawable = unit.position.is_finite() && unit.rotation.is_finite() && instance.scale.is_finite();
    if !drawable || (format == InstanceFormat::Matrix && instance.scale <= 0.0) {
        return;
    }
    let [x, y, z, scale] = decoded[0];
    let position = glam::Vec3::new(x, y, z);
    let rotation = glam::Quat::from_array(decoded[1]);
    let tolerance = 1.0e-5 * (1.0 + unit.position.abs().max_element());
    assert!(
        (position - unit.position).abs().max_element() <= tolerance,
        "{what}: instance {i} decodes at {position}, not {}",
        unit.position
    );
    let expected_scale = if format.carries_scale() {
        instance.scale
    } else {
        1.0
    };
    assert!(
        (scale - expected_scale).abs() <= 1.0e-5 * expected_scale.abs().max(1.0),
        "{what}: instance {i} decodes with scale {scale}, not {expected_scale}"
    );
    // |cos| of half the angle between them: the packed format's rotations
    // are within PACKED_ROTATION_ERROR_BOUND radians.
    let min_cos = if format == InstanceFormat::Packed16 {
        (cull_core::PACKED_ROTATION_ERROR_BOUND / 2.0).cos() - 1.0e-6
    } else {
        1.0 - 1.0e-5
    };
    assert!(
        rotation.dot(unit.rotation).abs() >= min_cos,
        "{what}: instance {i} decodes with rotation {rotation}, not {}",
        unit.rotation
    );
}

#[test]
fn gpu_encoded_instances_match_the_cpu_and_every_variant_culls_them_exactly() {
    let ctx = gpu();
    let pipeline = pipeline(ctx);
    for format in InstanceFormat::ALL {
        for (seed, n) in [(1u64, 0usize), (2, 1), (3, 257), (4, 4099)] {
            let what = format!("{format:?}, {n} instances");
            let scene = scene_with_long_rotations(seed, n, format);
            let cpu = format.encode(&scene.instances).unwrap();
            let (input, gpu_bytes, decoded) = encode_on_gpu(ctx, &pipeline, &scene, format);
            for i in 0..n {
                assert_encoded_alike(format, i, &gpu_bytes, &cpu, &what);
                assert_decoded(format, &scene.instances[i], &decoded[2 * i..2 * i + 2], &what, i);
            }
            let frustum = scene.frustum().unwrap();
            let reference = cull_core::cpu::classify(format, &gpu_bytes, scene.bounds, &frustum).unwrap();
            for (variant, tuning) in forms(ctx) {
                let culler = crate::harness::culler(ctx, variant, format, OutputKind::Indices, tuning);
                let capacity = (n as u32).max(1);
                let target = CullTarget::new(&ctx.device, &culler, capacity).unwrap();
                let request = CullRequest::new(
                    &input,
                    &target,
                    std::slice::from_ref(&frustum),
                    scene.bounds,
                    n as u32,
                );
                let mut encoder = ctx.device.create_command_encoder(&Default::default());
                culler.cull(&mut encoder, &ctx.queue, request).unwrap();
                ctx.queue.submit([encoder.finish()]);
                let visible = target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
                let out = target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
                let survivors = survivors_as_indices(format, OutputKind::Indices, &gpu_bytes, &out);
                assert_exact(&format!("{what}, {variant:?} {tuning:?}"), &reference, &survivors);
            }
        }
    }
}
