//! `--headless`: frames rendered offscreen, then the last one's drawn count
//! against the CPU reference, and the share of pixels lit.

use super::render::texture;
use super::{Args, BOUNDS, FORMAT, Scene};
use cull_core::GpuContext;
use std::error::Error;
use wgpu::TextureFormat;

/// Renders `--frames` frames offscreen and reports the last: the count the
/// GPU drew, the CPU reference's for the same camera, the pixels lit.
pub fn headless(args: &Args, gpu: &GpuContext) -> Result<(), Box<dyn Error>> {
    let size @ (width, height) = args.size.unwrap_or((320, 180));
    let color = texture(&gpu.device, size, TextureFormat::Rgba8UnormSrgb);
    let scene = Scene::new(gpu, color.format(), args.count, size)?;
    let view = color.create_view(&Default::default());
    let mut frustum = None;
    for frame in 0..args.frames.max(1) {
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        frustum = Some(scene.frame(&mut encoder, &view, frame as f32 / 60.0));
        gpu.queue.submit([encoder.finish()]);
    }
    // Blocking reads are fine after the last frame (the window's count is read without waiting).
    let drawn = scene.target.read_visible_count(&gpu.device, &gpu.queue)?;
    let row = (width * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT);
    // COPY_SRC: `read_back` copies it into a mappable buffer.
    let pixels = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: u64::from(row * height),
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    let layout = wgpu::TexelCopyBufferLayout {
        bytes_per_row: Some(row),
        ..Default::default()
    };
    let copy = wgpu::TexelCopyBufferInfo {
        buffer: &pixels,
        layout,
    };
    encoder.copy_texture_to_buffer(color.as_image_copy(), copy, color.size());
    gpu.queue.submit([encoder.finish()]);
    let bytes = cull_core::read_back(&gpu.device, &gpu.queue, &pixels, 0, pixels.size())?;
    let lit = (0..height * width)
        .filter(|i| bytes[(i / width * row + i % width * 4) as usize..][..3] != [0; 3])
        .count() as f64
        / f64::from(width * height);
    let (format, frustum) = (FORMAT, frustum.expect("one frame or more"));
    let reference = cull_core::cpu::cull(format, &scene.bytes, BOUNDS, &frustum)?.len();
    // Spheres within rounding of a plane, which the GPU may keep or not: the test allows for them.
    let borderline = cull_core::cpu::classify(format, &scene.bytes, BOUNDS, &frustum)?
        .borderline
        .len();
    let count = args.count;
    if args.json {
        let line = serde_json::json!({
            "example": "draw", "instances": count, "visible": drawn,
            "cpu_reference": reference, "cpu_borderline": borderline, "lit_fraction": lit,
        });
        println!("{line}");
    } else {
        let (lit, reference) = (
            lit * 100.0,
            format!("CPU reference {reference}, {borderline} borderline"),
        );
        println!("draw: {count} instances, {drawn} drawn ({reference}), {lit:.0}% of pixels lit");
    }
    Ok(())
}
