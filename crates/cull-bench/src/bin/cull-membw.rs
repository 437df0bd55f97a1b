//! cull-membw: whether the GPU keeps its memory speed between the cells of
//! a benchmark. Two 1 GiB buffers (smaller where bindings are) are measured
//! again and again with timestamp queries: a copy of half of one into the
//! other, and dependent random loads (one subgroup, each load's address
//! depending on the previous one, so the time per load is the memory
//! latency). Before each measurement it does what a bench does between
//! cells: `write` (upload half a buffer), `readback` (map a quarter back),
//! `cpu` (2 s of busy CPU threads, the GPU idle), `idle` (sleep 2 s) or
//! `none`; then, with `--warm-ms`, keeps the GPU busy with copies.
//!
//! On an NVIDIA H100, after a second or two without GPU work (nvidia-smi
//! then reads the SM clock at its idle 345 MHz) the short measured
//! submissions run slow and stay slow: the copy falls from 2.9 to 1.65 TB/s
//! and a load's latency rises from 0.26 to 1.2 µs, as from a clock that did
//! not come back up. 300 ms of sustained copies first restores the speed
//! (mostly: cull-bench warms for 500 ms). See docs/benchmarks.md.
//!
//! ```text
//! cull-membw --cells cpu
//! cull-membw --cells cpu --warm-ms 500
//! ```

use std::time::Duration;

const SHADER: &str = r#"
@group(0) @binding(0) var<storage, read_write> buf: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;
struct Params { len: u32, groups_x: u32, region: u32, steps: u32 }
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn copy(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let base = (wid.y * p.groups_x + wid.x) * 1024u + lid;
    for (var k = 0u; k < 4u; k += 1u) {
        let i = base + k * 256u;
        if i < p.len {
            dst[i] = buf[i];
        }
    }
}

@compute @workgroup_size(32)
fn chase(@builtin(local_invocation_index) lid: u32) {
    var x = lid * 2654435761u + 1u;
    var acc = 0u;
    for (var s = 0u; s < p.steps; s += 1u) {
        x = x * 1664525u + 1013904223u + acc;
        acc = buf[(x >> 3u) % p.region].x;
    }
    sink[lid + 1u] = acc;
}
"#;

const STEPS: u32 = 2048;

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    copy: wgpu::ComputePipeline,
    chase: wgpu::ComputePipeline,
    sink: wgpu::Buffer,
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    readback: wgpu::Buffer,
}

impl Gpu {
    fn new() -> (Self, String) {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::VULKAN),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = pollster::block_on(wgpu::util::initialize_adapter_from_env_or_default(
            &instance, None,
        ))
        .expect("an adapter");
        let info = adapter.get_info();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: None,
            required_features: wgpu::Features::TIMESTAMP_QUERY,
            required_limits: adapter.limits(),
            ..Default::default()
        }))
        .expect("a device");
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: None,
            entries: &(0..4)
                .map(|binding| wgpu::BindGroupLayoutEntry {
                    binding,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: if binding == 3 {
                            wgpu::BufferBindingType::Uniform
                        } else {
                            wgpu::BufferBindingType::Storage { read_only: false }
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                })
                .collect::<Vec<_>>(),
        });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let make = |entry| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pl),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let buffer = |size, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let gpu = Self {
            copy: make("copy"),
            chase: make("chase"),
            sink: buffer(256, wgpu::BufferUsages::STORAGE),
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: None,
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: buffer(
                16,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: buffer(16, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            device,
            queue,
        };
        (
            gpu,
            format!(
                "{} ({:?}, {} {})",
                info.name, info.backend, info.driver, info.driver_info
            ),
        )
    }

    fn bind(
        &self,
        buf: &wgpu::Buffer,
        offset: u64,
        size: u64,
        dst: &wgpu::Buffer,
        params: [u32; 4],
    ) -> wgpu::BindGroup {
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue
            .write_buffer(&uniform, 0, bytemuck::cast_slice(&params));
        let layout = self.copy.get_bind_group_layout(0);
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: buf,
                        offset,
                        size: wgpu::BufferSize::new(size),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: self.sink.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: dst.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: uniform.as_entire_binding(),
                },
            ],
        })
    }

    /// Median microseconds of `runs` timed dispatches.
    fn time(
        &self,
        pipeline: &wgpu::ComputePipeline,
        group: &wgpu::BindGroup,
        x: u32,
        y: u32,
        runs: usize,
    ) -> f64 {
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let mut encoder = self.device.create_command_encoder(&Default::default());
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &self.queries,
                            beginning_of_pass_write_index: Some(0),
                            end_of_pass_write_index: Some(1),
                        }),
                    });
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(x, y, 1);
                }
                encoder.resolve_query_set(&self.queries, 0..2, &self.resolve, 0);
                encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.readback, 0, 16);
                self.queue.submit([encoder.finish()]);
                let slice = self.readback.slice(..);
                slice.map_async(wgpu::MapMode::Read, |_| {});
                self.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
                let t: Vec<u64> = bytemuck::pod_collect_to_vec(&slice.get_mapped_range());
                self.readback.unmap();
                t[1].saturating_sub(t[0]) as f64 * self.queue.get_timestamp_period() as f64 / 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    }
}

fn main() {
    let mut action = "none".to_string();
    let mut warm_ms = 0u64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().expect("a value");
        match flag.as_str() {
            "--cells" => action = value,
            "--warm-ms" => warm_ms = value.parse().expect("milliseconds"),
            _ => panic!("usage: cull-membw [--cells write|readback|cpu|idle|none] [--warm-ms 500]"),
        }
    }
    let (gpu, name) = Gpu::new();
    cells_run(&gpu, &name, &action, warm_ms);
}

/// Measures the same two buffers 14 times, doing `action` before each
/// measurement (see the top of this file), then `warm_ms` of copies.
fn cells_run(gpu: &Gpu, name: &str, action: &str, warm_ms: u64) {
    println!("Device: {name}; between cells: {action}; then {warm_ms} ms of copies before measuring\n");
    // 1 GiB, or the largest binding where that is smaller (lavapipe: 128 MiB).
    let size: u64 = (1u64 << 30).min(gpu.device.limits().max_storage_buffer_binding_size) / 16 * 16;
    let make = |usage| {
        gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    let input = make(storage);
    let target = make(storage);
    let max_x = gpu.device.limits().max_compute_workgroups_per_dimension;
    let bytes: u64 = size / 2;
    let len = (bytes / 16) as u32;
    let groups = len.div_ceil(1024);
    let (x, y) = if groups <= max_x {
        (groups, 1)
    } else {
        (max_x, groups.div_ceil(max_x))
    };
    let copy = gpu.bind(&input, 0, bytes, &target, [len, x, len, 0]);
    let chase = gpu.bind(&input, 0, size, &target, [len, x, (size / 16) as u32, STEPS]);
    let host: Vec<u8> = (0..bytes as usize)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let t0 = std::time::Instant::now();
    println!("| cell | s | copy TB/s | chase ns |");
    println!("|---:|---:|---:|---:|");
    for cell in 0..14 {
        match action {
            "write" => {
                gpu.queue.write_buffer(&input, 0, &host);
                gpu.queue.submit([]);
            }
            "readback" => {
                let rb = make(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
                let mut encoder = gpu.device.create_command_encoder(&Default::default());
                encoder.copy_buffer_to_buffer(&target, 0, &rb, 0, size / 4);
                gpu.queue.submit([encoder.finish()]);
                rb.slice(..size / 4).map_async(wgpu::MapMode::Read, |_| {});
                gpu.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
                let sum: u64 = rb
                    .slice(..size / 4)
                    .get_mapped_range()
                    .iter()
                    .step_by(4096)
                    .map(|&b| b as u64)
                    .sum();
                std::hint::black_box(sum);
            }
            "idle" => std::thread::sleep(Duration::from_secs(2)),
            "cpu" => {
                let until = std::time::Instant::now() + Duration::from_secs(2);
                std::thread::scope(|s| {
                    for _ in 0..16 {
                        s.spawn(|| {
                            let mut v = 1u64;
                            while std::time::Instant::now() < until {
                                for _ in 0..10000 {
                                    v = v.wrapping_mul(6364136223846793005).wrapping_add(1);
                                }
                            }
                            std::hint::black_box(v);
                        });
                    }
                });
            }
            "none" => {}
            other => panic!("--cells write|readback|idle|cpu|none, not {other}"),
        }
        gpu.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let warm = std::time::Instant::now();
        while warm.elapsed() < Duration::from_millis(warm_ms) {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&gpu.copy);
                pass.set_bind_group(0, &copy, &[]);
                for _ in 0..8 {
                    pass.dispatch_workgroups(x, y, 1);
                }
            }
            gpu.queue.submit([encoder.finish()]);
            gpu.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        }
        let tb = 2.0 * bytes as f64 / gpu.time(&gpu.copy, &copy, x, y, 9) / 1e6;
        let ns = gpu.time(&gpu.chase, &chase, 1, 1, 3) * 1000.0 / STEPS as f64;
        println!(
            "| {cell} | {:.1} | {tb:.2} | {ns:.0} |",
            t0.elapsed().as_secs_f32()
        );
    }
}
