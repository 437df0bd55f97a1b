//! cull-tiny-draws: what drawing many tiny instances costs the GPU's
//! geometry front end, by how the instances reach it. The same triangles,
//! each a pixel or two across (what a culled list's far levels of detail
//! are), drawn into a 1280x720 color and depth target by
//!
//! - `instanced`: one indexed draw of a 3-index mesh, an instance each (as
//!   a batch's level is drawn);
//! - `packed K`: one indexed draw of a mesh of K copies of the triangle,
//!   K instances per hardware instance (the copy past the last instance
//!   collapses to a point);
//! - `pulled`: one non-instanced draw of 3N vertices, the instance taken
//!   from the vertex index;
//! - `points`: one non-instanced draw of N points, a pixel each at the
//!   triangle's place (what a level of detail of one point would draw);
//! - `splat`: no draw, a compute pass that writes each instance's pixel
//!   with an atomic max of its depth and color into a buffer the size of
//!   the target (what a compute rasterizer of instances below a pixel or
//!   two would do before a full-screen pass shades the pixels it wrote);
//! - `splat (cull-core)`: the same by `cull_core::PixelSplatter`, from a
//!   cull's list of 32-byte instances: two passes (each survivor's nearest
//!   depth, then its id), each reading the survivor's index and instance.
//!
//! The shaders do nothing else (a flat color), so the times are the
//! front end's and the rasterizer's, not a material's. GPU times from
//! timestamp queries around each render pass, medians of `--runs` rounds
//! that take every mode in turn (after two untimed rounds). Each mode's
//! picture is read back: the pixels a triangle mode lit must be the
//! instanced draw's, or the mode is reported as drawing something else
//! (points and splats light a pixel each, so only their count is
//! reported).
//!
//! ```text
//! cull-tiny-draws --counts 100000,450000,1000000 --pixels 1.5
//! ```

#[path = "../roofline.rs"]
#[allow(dead_code)] // shared with the bench, which uses a different part of it
mod roofline;

use argh::FromArgs;
use roofline::median;
use wgpu::util::DeviceExt;

/// Times many tiny instances drawn instanced, packed and pulled.
#[derive(FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Args {
    /// instance counts, comma-separated (default 100000,450000,1000000)
    #[argh(option, default = "String::from(\"100000,450000,1000000\")")]
    counts: String,
    /// each triangle's size on screen, in pixels (default 1.5)
    #[argh(option, default = "1.5")]
    pixels: f32,
    /// timed draws per mode and count; the median is reported (default 15)
    #[argh(option, default = "15")]
    runs: usize,
}

const SIZE: (u32, u32) = (1280, 720);
const PACKS: [u32; 3] = [4, 16, 64];

const SHADER: &str = r#"
struct Draw { count: u32, per_instance: u32, pixel: vec2<f32> }
@group(0) @binding(0) var<storage, read> places: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> draw: Draw;

struct Out { @builtin(position) clip: vec4<f32>, @location(0) color: vec3<f32> }

// Instance `i`'s corner `c`: a triangle `size` pixels across around its place.
fn corner(i: u32, c: u32) -> Out {
    var out: Out;
    if i >= draw.count {
        out.clip = vec4(2.0, 2.0, 0.5, 1.0);
        return out;
    }
    let p = places[i];
    let offsets = array(vec2(-0.5, -0.4), vec2(0.5, -0.4), vec2(0.0, 0.6));
    out.clip = vec4(p.xy + offsets[c] * p.w * draw.pixel, p.z, 1.0);
    out.color = vec3(p.z * 4.0, 0.5, 1.0 - p.z * 4.0);
    return out;
}

@vertex
fn instanced(@builtin(vertex_index) v: u32, @builtin(instance_index) i: u32) -> Out {
    return corner(i * draw.per_instance + v / 3u, v % 3u);
}

@vertex
fn pulled(@builtin(vertex_index) v: u32) -> Out {
    return corner(v / 3u, v % 3u);
}

@vertex
fn point(@builtin(vertex_index) v: u32) -> Out {
    var out = corner(v, 0u);
    let p = places[v];
    out.clip = vec4(p.xy, p.z, 1.0);
    return out;
}

@group(0) @binding(2) var<storage, read_write> splats: array<atomic<u32>>;

// Instance `i`'s pixel, nearest wins (reverse depth: larger is nearer):
// its depth above eight bits of color.
@compute @workgroup_size(256)
fn splat(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= draw.count {
        return;
    }
    let p = places[i];
    let size = vec2<f32>(2.0, 2.0) / draw.pixel;
    let xy = vec2<u32>(clamp((p.xy * vec2(0.5, -0.5) + 0.5) * size, vec2(0.0), size - 1.0));
    let depth = u32(clamp(p.z * 4.0, 0.0, 1.0) * 16777215.0);
    atomicMax(&splats[xy.y * u32(size.x) + xy.x], (depth << 8u) | (i & 255u) | 1u);
}

@fragment
fn shade(in: Out) -> @location(0) vec4<f32> {
    return vec4(in.color, 1.0);
}
"#;

/// How a mode puts its instances on screen.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// Triangles, `per_instance` of them per hardware instance (0:
    /// pulled, no instancing).
    Triangles { per_instance: u32 },
    /// One draw of a point per instance.
    Points,
    /// A compute pass writing a pixel per instance.
    Splat,
    /// `cull_core::PixelSplatter` over a culled list.
    CullSplat,
}

/// One way of drawing: its name and shape.
struct Mode {
    name: String,
    shape: Shape,
}

fn modes() -> Vec<Mode> {
    let mode = |name: String, shape| Mode { name, shape };
    let mut all = vec![mode("instanced".into(), Shape::Triangles { per_instance: 1 })];
    all.extend(PACKS.map(|k| mode(format!("packed {k}"), Shape::Triangles { per_instance: k })));
    all.push(mode("pulled".into(), Shape::Triangles { per_instance: 0 }));
    all.push(mode("points".into(), Shape::Points));
    all.push(mode("splat (compute)".into(), Shape::Splat));
    all.push(mode("splat (cull-core)".into(), Shape::CullSplat));
    all
}

/// `n` places scattered over the screen (clip x, y in −1..1), at depths
/// in (0, 0.25] (a reverse depth of 0 is the far plane, which the library's
/// splat leaves out), each `pixels` across.
fn places(n: u32, pixels: f32) -> Vec<[f32; 4]> {
    // Each coordinate of its own, through murmur3's finalizer: independent
    // and uniform.
    let mix = |mut h: u32| {
        h ^= h >> 16;
        h = h.wrapping_mul(0x85EB_CA6B);
        h ^= h >> 13;
        h = h.wrapping_mul(0xC2B2_AE35);
        h ^ (h >> 16)
    };
    let unit = |i: u32, k: u32| (mix(i.wrapping_mul(3).wrapping_add(k)) >> 8) as f32 / (1u32 << 24) as f32;
    (0..n)
        .map(|i| {
            [
                unit(i, 0) * 2.0 - 1.0,
                unit(i, 1) * 2.0 - 1.0,
                0.25 * unit(i, 2).max(f32::EPSILON),
                pixels,
            ]
        })
        .collect()
}

/// One count's instances: their places on screen, and the same as a
/// culled list of 32-byte instances whose points project to those places.
struct Instances {
    places: wgpu::Buffer,
    input: cull_core::CullInput,
    list: cull_core::CullTarget,
}

/// The culled list's view: clip space is world space, reverse depth.
const SPLAT_VIEW: cull_core::PixelSplatView = cull_core::PixelSplatView {
    clip_from_world: glam::Mat4::IDENTITY,
    reverse_z: true,
};

struct Bench {
    ctx: cull_core::GpuContext,
    culler: cull_core::Culler,
    splatter: cull_core::PixelSplatter,
    splat_pixels: cull_core::PixelSplatTarget,
    instanced: wgpu::RenderPipeline,
    pulled: wgpu::RenderPipeline,
    points: wgpu::RenderPipeline,
    splat: wgpu::ComputePipeline,
    splat_layout: wgpu::BindGroupLayout,
    splats: wgpu::Buffer,
    layout: wgpu::BindGroupLayout,
    color: wgpu::Texture,
    depth: wgpu::TextureView,
    timer: roofline::PassTimer,
}

impl Bench {
    fn new() -> Self {
        let ctx = roofline::timed_context();
        let device = &ctx.device;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("tiny draws"),
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &[
                layout_entry(0, VERTEX, wgpu::BufferBindingType::Storage { read_only: true }),
                layout_entry(1, VERTEX, wgpu::BufferBindingType::Uniform),
            ],
        });
        let (splat, splat_layout) = splat_pipeline(device, &module);
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = |entry, topology| {
            device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    buffers: &[],
                },
                primitive: wgpu::PrimitiveState {
                    topology,
                    ..Default::default()
                },
                depth_stencil: Some(wgpu::DepthStencilState {
                    format: wgpu::TextureFormat::Depth32Float,
                    depth_write_enabled: Some(true),
                    depth_compare: Some(wgpu::CompareFunction::Greater),
                    stencil: Default::default(),
                    bias: Default::default(),
                }),
                multisample: Default::default(),
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some("shade"),
                    compilation_options: Default::default(),
                    targets: &[Some(wgpu::TextureFormat::Rgba8Unorm.into())],
                }),
                multiview_mask: None,
                cache: None,
            })
        };
        let target = |format| {
            device.create_texture(&wgpu::TextureDescriptor {
                label: None,
                size: wgpu::Extent3d {
                    width: SIZE.0,
                    height: SIZE.1,
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
                view_formats: &[],
            })
        };
        let desc = cull_core::CullerDesc {
            output: cull_core::OutputKind::Indices,
            ..Default::default()
        };
        let culler = cull_core::Culler::new(device, &ctx.queue, &desc).unwrap();
        Self {
            splatter: cull_core::PixelSplatter::new(device, Default::default()),
            splat_pixels: cull_core::PixelSplatTarget::new(device, SIZE, 1).unwrap(),
            culler,
            instanced: pipeline("instanced", wgpu::PrimitiveTopology::TriangleList),
            pulled: pipeline("pulled", wgpu::PrimitiveTopology::TriangleList),
            points: pipeline("point", wgpu::PrimitiveTopology::PointList),
            splat,
            splat_layout,
            splats: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("splats"),
                size: (SIZE.0 * SIZE.1 * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            layout,
            color: target(wgpu::TextureFormat::Rgba8Unorm),
            depth: target(wgpu::TextureFormat::Depth32Float).create_view(&Default::default()),
            timer: roofline::PassTimer::new(device),
            ctx,
        }
    }

    /// `places` as a buffer, and as instances culled into a list (all in
    /// view) for the cull-core splat.
    fn instances(&self, places: &[[f32; 4]]) -> Instances {
        let device = &self.ctx.device;
        let n = places.len() as u32;
        let instances: Vec<cull_core::Instance> = places
            .iter()
            .map(|p| cull_core::Instance::from_position(glam::Vec3::new(p[0], p[1], p[2])))
            .collect();
        let input = cull_core::CullInput::new(device, self.culler.format(), n).unwrap();
        input.write_instances(&self.ctx.queue, 0, &instances).unwrap();
        let list = cull_core::CullTarget::new(device, &self.culler, n).unwrap();
        let view = cull_core::Frustum::from_clip_from_world(SPLAT_VIEW.clip_from_world, None).unwrap();
        let bounds = cull_core::Sphere::new(glam::Vec3::ZERO, 0.0);
        let request = cull_core::CullRequest::new(&input, &list, std::slice::from_ref(&view), bounds, n);
        let mut encoder = device.create_command_encoder(&Default::default());
        self.culler.cull(&mut encoder, &self.ctx.queue, request).unwrap();
        self.ctx.queue.submit([encoder.finish()]);
        Instances {
            places: device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(places),
                usage: wgpu::BufferUsages::STORAGE,
            }),
            input,
            list,
        }
    }

    /// GPU microseconds of one render pass drawing `n` instances of
    /// `places` the way `mode` says.
    fn time(&self, mode: &Mode, n: u32, instances: &Instances) -> f64 {
        let device = &self.ctx.device;
        let places = &instances.places;
        let k = match mode.shape {
            Shape::Triangles { per_instance } => per_instance,
            Shape::Points | Shape::Splat | Shape::CullSplat => 0,
        };
        let pixel = [2.0 / SIZE.0 as f32, 2.0 / SIZE.1 as f32];
        let uniform: [u32; 4] = [n, k.max(1), pixel[0].to_bits(), pixel[1].to_bits()];
        let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&uniform),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        if mode.shape == Shape::Splat {
            return self.time_splat(n, places, &uniform);
        }
        if mode.shape == Shape::CullSplat {
            return self.time_cull_splat(instances);
        }
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: places.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: uniform.as_entire_binding(),
                },
            ],
        });
        // The packed mesh: K copies of the triangle's three indices.
        let indices: Vec<u32> = (0..3 * k.max(1)).collect();
        let index_buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&indices),
            usage: wgpu::BufferUsages::INDEX,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: None,
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &self.color.create_view(&Default::default()),
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: Some(wgpu::RenderPassDepthStencilAttachment {
                    view: &self.depth,
                    depth_ops: Some(wgpu::Operations {
                        load: wgpu::LoadOp::Clear(0.0),
                        store: wgpu::StoreOp::Store,
                    }),
                    stencil_ops: None,
                }),
                timestamp_writes: Some(self.timer.render_writes()),
                occlusion_query_set: None,
                multiview_mask: None,
            });
            pass.set_bind_group(0, &bind_group, &[]);
            if mode.shape == Shape::Points {
                pass.set_pipeline(&self.points);
                pass.draw(0..n, 0..1);
            } else if k == 0 {
                pass.set_pipeline(&self.pulled);
                pass.draw(0..3 * n, 0..1);
            } else {
                pass.set_pipeline(&self.instanced);
                pass.set_index_buffer(index_buffer.slice(..), wgpu::IndexFormat::Uint32);
                pass.draw_indexed(0..3 * k, 0, 0..n.div_ceil(k));
            }
        }
        self.timer.submit_and_read(&self.ctx, encoder)
    }

    /// GPU microseconds of the compute pass that splats `n` instances of
    /// `places` (the buffer of pixels cleared before it, untimed).
    fn time_splat(&self, n: u32, places: &wgpu::Buffer, uniform: &wgpu::Buffer) -> f64 {
        let device = &self.ctx.device;
        let buffers = [places, uniform, &self.splats];
        let entries: Vec<_> = (0u32..)
            .zip(buffers)
            .map(|(binding, buffer)| wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.splat_layout,
            entries: &entries,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.clear_buffer(&self.splats, 0, None);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(self.timer.compute_writes()),
            });
            pass.set_pipeline(&self.splat);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(n.div_ceil(256), 1, 1);
        }
        self.timer.submit_and_read(&self.ctx, encoder)
    }

    /// GPU microseconds of `PixelSplatter`'s pass over the culled list (its
    /// pixels cleared before it, untimed).
    fn time_cull_splat(&self, instances: &Instances) -> f64 {
        let source = cull_core::PixelSplatSource {
            input: &instances.input,
            target: &instances.list,
            list: 0,
            local_center: glam::Vec3::ZERO,
            world_from_local: glam::Mat4::IDENTITY,
            id_base: 0,
        };
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        self.splat_pixels.clear(&mut encoder);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(self.timer.compute_writes()),
            });
            self.splatter
                .splat_in_pass(
                    &mut pass,
                    &self.ctx.queue,
                    &self.splat_pixels,
                    &SPLAT_VIEW,
                    &[source],
                )
                .unwrap();
        }
        self.timer.submit_and_read(&self.ctx, encoder)
    }

    /// The pixels the last draw (or splat) lit, read back: how many, and
    /// a hash of which.
    fn lit_pixels(&self, shape: Shape) -> (usize, u64) {
        let splat = matches!(shape, Shape::Splat | Shape::CullSplat);
        let device = &self.ctx.device;
        let bytes = (SIZE.0 * SIZE.1 * 4) as u64;
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&Default::default());
        if shape == Shape::CullSplat {
            encoder.copy_buffer_to_buffer(self.splat_pixels.ids(), 0, &readback, 0, bytes);
        } else if splat {
            encoder.copy_buffer_to_buffer(&self.splats, 0, &readback, 0, bytes);
        } else {
            self.copy_color(&mut encoder, &readback);
        }
        self.ctx.queue.submit([encoder.finish()]);
        let slice = readback.slice(..);
        slice.map_async(wgpu::MapMode::Read, |_| {});
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let pixels = slice.get_mapped_range();
        // A splat's pixel is a nonzero word; a drawn one is not black.
        let lit = pixels
            .chunks(4)
            .map(|p| if splat { p != [0; 4] } else { p[..3] != [0, 0, 0] })
            .enumerate();
        // FNV-1a over the lit pixels' indices.
        lit.filter(|(_, lit)| *lit)
            .fold((0, 0xCBF2_9CE4_8422_2325), |(n, h), (i, _)| {
                (n + 1, (h ^ i as u64).wrapping_mul(0x100_0000_01B3))
            })
    }

    /// Records a copy of the color target into `readback`.
    fn copy_color(&self, encoder: &mut wgpu::CommandEncoder, readback: &wgpu::Buffer) {
        encoder.copy_texture_to_buffer(
            self.color.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: readback,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(SIZE.0 * 4),
                    rows_per_image: None,
                },
            },
            self.color.size(),
        );
    }
}

const VERTEX: wgpu::ShaderStages = wgpu::ShaderStages::VERTEX;
const COMPUTE: wgpu::ShaderStages = wgpu::ShaderStages::COMPUTE;

fn layout_entry(
    binding: u32,
    visibility: wgpu::ShaderStages,
    ty: wgpu::BufferBindingType,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// The splat's compute pipeline and its bindings: the places, the draw's
/// uniform and the target-sized buffer of pixels.
fn splat_pipeline(
    device: &wgpu::Device,
    module: &wgpu::ShaderModule,
) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: None,
        entries: &[
            layout_entry(0, COMPUTE, wgpu::BufferBindingType::Storage { read_only: true }),
            layout_entry(1, COMPUTE, wgpu::BufferBindingType::Uniform),
            layout_entry(2, COMPUTE, wgpu::BufferBindingType::Storage { read_only: false }),
        ],
    });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("splat"),
        layout: Some(&pipeline_layout),
        module,
        entry_point: Some("splat"),
        compilation_options: Default::default(),
        cache: None,
    });
    (pipeline, layout)
}

fn main() {
    let args: Args = argh::from_env();
    let counts: Vec<u32> = args
        .counts
        .split(',')
        .map(|s| {
            // Zero would bind an empty buffer, which wgpu refuses.
            s.trim().parse().ok().filter(|&n: &u32| n > 0).unwrap_or_else(|| {
                eprintln!("--counts: `{s}` is not a count of at least 1");
                std::process::exit(2)
            })
        })
        .collect();
    if !(args.pixels > 0.0 && args.pixels.is_finite()) || args.runs == 0 {
        eprintln!("--pixels must be a positive size and --runs at least 1");
        std::process::exit(2);
    }
    let bench = Bench::new();
    println!(
        "tiny draws on {}: triangles {} px across, {}x{}",
        bench.ctx.describe(),
        args.pixels,
        SIZE.0,
        SIZE.1
    );
    println!("| instances | mode | GPU µs | ns per instance | ÷ instanced | pixels lit |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in counts {
        let instances = bench.instances(&places(n, args.pixels));
        let modes = modes();
        // Rounds that take every mode in turn, the first two untimed.
        let mut times = vec![Vec::new(); modes.len()];
        for round in 0..args.runs + 2 {
            for (mode, times) in modes.iter().zip(&mut times) {
                let us = bench.time(mode, n, &instances);
                if round >= 2 {
                    times.push(us);
                }
            }
        }
        let mut instanced = None;
        let mut splat_pixels = None;
        for (mode, times) in modes.iter().zip(times) {
            bench.time(mode, n, &instances);
            let (us, (lit, which)) = (median(times), bench.lit_pixels(mode.shape));
            let (base, base_which) = *instanced.get_or_insert((us, which));
            let per = us * 1000.0 / n.max(1) as f64;
            if mode.shape == Shape::Splat {
                splat_pixels = Some(which);
            }
            let same = if mode.shape == Shape::CullSplat {
                if splat_pixels == Some(which) {
                    " (the splat's pixels)"
                } else {
                    " (not the splat's pixels)"
                }
            } else if !matches!(mode.shape, Shape::Triangles { .. }) {
                " (a pixel each)"
            } else if which == base_which {
                ""
            } else {
                " (not the instanced draw's)"
            };
            println!(
                "| {n} | {} | {us:.1} | {per:.2} | {:.2}× | {lit}{same} |",
                mode.name,
                base / us
            );
        }
    }
}
