//! Culls a field of cubes on the GPU every frame and draws the survivors with
//! one indirect indexed draw: cull-core with plain wgpu and winit, no engine.
//!
//! Each frame the culler votes every instance against the orbiting camera's
//! frustum and copies the survivors densely into the target's output buffer,
//! writing their number into the target's `DrawIndexedIndirectArgs`. The
//! render pass binds that output as the per-instance vertex buffer
//! (`InstanceFormat::vertex_layout`) and draws it with
//! `CullTarget::draw_view_indexed`: the CPU never learns the count in the
//! frame path. The window title shows it, read back without stalling.
//!
//! `--headless` renders offscreen instead and compares the last frame's
//! drawn count with the CPU reference (`cull_core::cpu`); the
//! `examples` test runs it so.
//!
//! The culling is here; `render.rs` draws (a cube mesh, its pipeline),
//! `window.rs` and `headless.rs` run frames in a window or offscreen.
//!
//! ```text
//! cargo run --release -p cull-core --example draw -- [--count 1e6] [--size 1280x720]
//! cargo run --release -p cull-core --example draw -- --headless [--frames 3] [--json]
//! ```

mod headless;
mod render;
mod window;

use argh::FromArgs;
use cull_core::{
    CullError, CullInput, CullRequest, CullTarget, Culler, CullerDesc, Frustum, GpuContext, Instance,
    InstanceFormat, OutputKind, Sphere,
};
use glam::{Mat4, Quat, Vec3};
use render::{CubeRenderer, DEPTH, texture};
use wgpu::util::DrawIndexedIndirectArgs;
use wgpu::{CommandEncoder, TextureFormat, TextureView};
use winit::event_loop::EventLoop;

/// Culls a field of cubes against an orbiting camera on the GPU and draws the survivors indirectly.
#[derive(FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
pub struct Args {
    /// instances in the field (default 200000; 1e6 is accepted)
    #[argh(option, arg_name = "N", from_str_fn(count), default = "200_000")]
    pub count: u32,
    /// render offscreen without a window and print a summary of the last frame
    #[argh(switch)]
    pub headless: bool,
    /// frames to render in headless mode (default 3)
    #[argh(option, arg_name = "N", default = "3")]
    pub frames: u32,
    /// with --headless: print one JSON line instead of a sentence
    #[argh(switch)]
    pub json: bool,
    /// image size (default 1280x720 windowed, 320x180 headless)
    #[argh(option, arg_name = "WxH", from_str_fn(size))]
    pub size: Option<(u32, u32)>,
}

fn count(value: &str) -> Result<u32, String> {
    match value.parse::<f64>() {
        Ok(n) if (1.0..=1e8).contains(&n) && n.fract() == 0.0 => Ok(n as u32),
        _ => Err("expected a whole number of instances from 1 to 1e8, such as 200000 or 1e6".into()),
    }
}

fn size(value: &str) -> Result<(u32, u32), String> {
    let parse = |s: &str| s.parse::<u32>().ok().filter(|&n| n > 0);
    match value.split_once('x').map(|(w, h)| (parse(w), parse(h))) {
        Some((Some(w), Some(h))) => Ok((w, h)),
        _ => Err("expected WIDTHxHEIGHT, such as 1280x720".into()),
    }
}

/// Every instance's bounds in mesh space: the sphere around the unit cube.
const BOUNDS: Sphere = Sphere::new(Vec3::ZERO, 0.87);
/// The instances' format: position and scale, then a rotation (32 B).
const FORMAT: InstanceFormat = InstanceFormat::PosQuat;
const SPACING: f32 = 2.5;

/// A square grid of `count` cubes around the origin, each turned and scaled by a hash of its index.
fn field(count: u32) -> (Vec<Instance>, f32) {
    let side = (count as f32).sqrt().ceil() as u32;
    let half = side as f32 * SPACING / 2.0;
    let hash = |i: u32, k: u32| (i.wrapping_mul(2_654_435_761) ^ k).wrapping_mul(2_246_822_519) >> 8;
    let unit = |i: u32, k: u32| hash(i, k) as f32 / (1 << 24) as f32;
    let instances = (0..count)
        .map(|i| Instance {
            position: Vec3::new((i % side) as f32, 0.0, (i / side) as f32) * SPACING
                - Vec3::new(half, 0.0, half),
            rotation: Quat::from_euler(glam::EulerRot::YXZ, unit(i, 1) * 6.3, unit(i, 2), unit(i, 3)),
            scale: 0.5 + 0.5 * unit(i, 4),
        })
        .collect();
    (instances, half)
}

/// What every frame uses: the culler, the instances on the GPU, the cull's
/// target (the survivors and the draw's arguments), and the renderer.
pub struct Scene {
    culler: Culler,
    input: CullInput,
    target: CullTarget,
    count: u32,
    /// The instances as the GPU holds them, for the CPU reference.
    bytes: Vec<u8>,
    half: f32,
    queue: wgpu::Queue,
    renderer: CubeRenderer,
    depth: TextureView,
    aspect: f32,
}

impl Scene {
    fn new(gpu: &GpuContext, color: TextureFormat, count: u32, size: (u32, u32)) -> Result<Self, CullError> {
        let device = &gpu.device;
        // Copies of the survivors (not their indices): drawn as per-instance vertices.
        let desc = CullerDesc {
            format: FORMAT,
            output: OutputKind::Instances,
            ..Default::default()
        };
        let culler = Culler::new(device, &gpu.queue, &desc)?;
        let (instances, half) = field(count);
        let bytes = FORMAT.encode(&instances)?;
        let input = CullInput::new(device, FORMAT, count)?;
        input.write(&gpu.queue, 0, &bytes)?;
        let target = CullTarget::new(device, &culler, count)?;
        // The draw's arguments but `instance_count`, which each cull writes.
        let index_count = render::cube().1.len() as u32;
        target.set_indexed_draw(
            &gpu.queue,
            DrawIndexedIndirectArgs {
                index_count,
                ..Default::default()
            },
        );
        Ok(Self {
            culler,
            input,
            target,
            count,
            bytes,
            half,
            queue: gpu.queue.clone(),
            renderer: CubeRenderer::new(device, color, FORMAT),
            depth: texture(device, size, DEPTH).create_view(&Default::default()),
            aspect: size.0 as f32 / size.1 as f32,
        })
    }

    fn resize(&mut self, device: &wgpu::Device, size: (u32, u32)) {
        self.depth = texture(device, size, DEPTH).create_view(&Default::default());
        self.aspect = size.0 as f32 / size.1 as f32;
    }

    /// Records one frame at `time` seconds: the cull, then one draw of its
    /// survivors into `color`. Returns the frustum culled against.
    fn frame(&self, encoder: &mut CommandEncoder, color: &TextureView, time: f32) -> Frustum {
        // The camera circles inside the field looking across it, and sees as
        // far as the field's half width: most of the field is culled.
        let (angle, far) = (0.1 * time, self.half);
        let eye =
            Vec3::new(angle.cos(), 0.0, angle.sin()) * 0.6 * self.half + Vec3::Y * (4.0 + 0.1 * self.half);
        let view = Mat4::look_at_rh(eye, eye * Vec3::new(0.3, 0.0, 0.3), Vec3::Y);
        let clip_from_world = Mat4::perspective_rh(1.0, self.aspect, 0.5, far) * view;
        self.renderer.set_camera(&self.queue, clip_from_world, far);
        // The cull: every instance against the frustum, the survivors copied
        // densely into the target, their number into the draw's arguments.
        let frustum = Frustum::from_clip_from_world(clip_from_world, None).expect("a perspective camera");
        let frusta = std::slice::from_ref(&frustum);
        let request = CullRequest::new(&self.input, &self.target, frusta, BOUNDS, self.count);
        self.culler
            .cull(encoder, &self.queue, request)
            .expect("valid bounds and count");
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: color,
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
                    load: wgpu::LoadOp::Clear(1.0),
                    store: wgpu::StoreOp::Discard,
                }),
                stencil_ops: None,
            }),
            ..Default::default()
        });
        // The draw: the mesh once per survivor, the count read on the GPU.
        self.renderer.draw(&mut pass, &self.target);
        frustum
    }
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("draw: {e}");
    std::process::exit(1)
}

fn main() {
    let args: Args = argh::from_env();
    let no_display = "no display to open a window on; run with --headless to render offscreen";
    // Linux and the BSDs need a Wayland compositor or an X11 server (winit
    // is built for both here, and tries Wayland first).
    let needs_server = cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    ));
    let has_server = ["WAYLAND_DISPLAY", "DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !args.headless && needs_server && !has_server {
        eprintln!("draw: {no_display} (neither WAYLAND_DISPLAY nor DISPLAY is set)");
        std::process::exit(2);
    }
    if args.headless {
        let gpu =
            GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty()).unwrap_or_else(|e| fail(e));
        return headless::headless(&args, &gpu).unwrap_or_else(|e| fail(e));
    }
    let event_loop = EventLoop::new().unwrap_or_else(|e| {
        eprintln!("draw: {no_display} ({e})");
        std::process::exit(2)
    });
    let mut app = window::App {
        args,
        start: std::time::Instant::now(),
        window: None,
    };
    event_loop.run_app(&mut app).unwrap_or_else(|e| fail(e));
}
