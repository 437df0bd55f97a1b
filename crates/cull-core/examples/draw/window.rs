//! The windowed mode: a winit window and its surface, a frame drawn
//! whenever the window asks, the drawn count in its title.

use super::{Args, Scene, fail};
use cull_core::{AsyncReadback, GpuContext, INSTANCE_COUNT_OFFSET};
use std::sync::Arc;
use wgpu::CurrentSurfaceTexture;
use winit::application::ApplicationHandler;
use winit::dpi::PhysicalSize;
use winit::event::WindowEvent;
use winit::event_loop::ActiveEventLoop;
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

/// The windowed mode: the window, its surface, the device and the scene,
/// made once the event loop resumes.
pub struct App {
    pub args: Args,
    pub start: std::time::Instant,
    pub window: Option<Windowed>,
}

pub struct Windowed {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    gpu: GpuContext,
    scene: Scene,
    /// The drawn count, copied from the indirect arguments and mapped without stalling a frame.
    drawn: AsyncReadback,
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.window.is_some() {
            return;
        }
        let size = self.args.size.unwrap_or((1280, 720));
        let attributes = Window::default_attributes()
            .with_title("draw")
            .with_inner_size(PhysicalSize::<u32>::from(size));
        let window = Arc::new(event_loop.create_window(attributes).unwrap_or_else(|e| fail(e)));
        // The window first, then an adapter that can present to it: the
        // instance knows the window system (the GL backend needs it), and
        // the adapter is chosen for the surface.
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY),
            flags: wgpu::InstanceFlags::from_env_or_default(),
            ..wgpu::InstanceDescriptor::new_with_display_handle(Box::new(event_loop.owned_display_handle()))
        });
        let surface = instance
            .create_surface(window.clone())
            .unwrap_or_else(|e| fail(e));
        let gpu =
            GpuContext::for_surface(instance, &surface, wgpu::Features::empty()).unwrap_or_else(|e| fail(e));
        let PhysicalSize { width, height } = window.inner_size();
        let mut config = surface
            .get_default_config(&gpu.adapter, width.max(1), height.max(1))
            .unwrap_or_else(|| fail("the adapter cannot present to this window"));
        let formats = surface.get_capabilities(&gpu.adapter).formats;
        config.format = formats.into_iter().find(|f| f.is_srgb()).unwrap_or(config.format);
        surface.configure(&gpu.device, &config);
        let size = (config.width, config.height);
        let scene = Scene::new(&gpu, config.format, self.args.count, size).unwrap_or_else(|e| fail(e));
        let drawn = AsyncReadback::new(&gpu.device, 4, "draw-count");
        // Every frame asks for the next; this asks for the first.
        window.request_redraw();
        self.window = Some(Windowed {
            window,
            surface,
            config,
            gpu,
            scene,
            drawn,
        });
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: WindowId, event: WindowEvent) {
        let Some(Windowed {
            window,
            surface,
            config,
            gpu,
            scene,
            drawn,
        }) = &mut self.window
        else {
            return;
        };
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::KeyboardInput { event, .. } if event.logical_key == Key::Named(NamedKey::Escape) => {
                event_loop.exit()
            }
            WindowEvent::Occluded(false) => window.request_redraw(),
            WindowEvent::Resized(PhysicalSize { width, height }) if width > 0 && height > 0 => {
                (config.width, config.height) = (width, height);
                surface.configure(&gpu.device, config);
                scene.resize(&gpu.device, (width, height));
            }
            WindowEvent::RedrawRequested => {
                let (frame, suboptimal) = match surface.get_current_texture() {
                    CurrentSurfaceTexture::Success(frame) => (frame, false),
                    CurrentSurfaceTexture::Suboptimal(frame) => (frame, true),
                    // Reconfigured, the next frame draws.
                    CurrentSurfaceTexture::Outdated => {
                        surface.configure(&gpu.device, config);
                        return window.request_redraw();
                    }
                    CurrentSurfaceTexture::Timeout => return window.request_redraw(),
                    // Drawn again once visible (`WindowEvent::Occluded(false)`).
                    CurrentSurfaceTexture::Occluded => return,
                    CurrentSurfaceTexture::Lost | CurrentSurfaceTexture::Validation => {
                        fail("the window's surface was lost")
                    }
                };
                let mut encoder = gpu.device.create_command_encoder(&Default::default());
                let view = frame.texture.create_view(&Default::default());
                scene.frame(&mut encoder, &view, self.start.elapsed().as_secs_f32());
                let at = scene.target.draw_args_offset(0) + INSTANCE_COUNT_OFFSET;
                drawn.copy(&mut encoder, scene.target.draw_args(), at, 4, 0);
                gpu.queue.submit([encoder.finish()]);
                window.pre_present_notify();
                frame.present();
                if suboptimal {
                    surface.configure(&gpu.device, config);
                }
                // Polling advances the mapping: the count arrives a frame or two later.
                let _ = gpu.device.poll(wgpu::PollType::Poll);
                if let Some((bytes, _)) = drawn.poll() {
                    let drawn: u32 = bytemuck::pod_read_unaligned(&bytes);
                    window.set_title(&format!("draw: {drawn} of {} instances drawn", scene.count));
                }
                window.request_redraw();
            }
            _ => {}
        }
    }
}
