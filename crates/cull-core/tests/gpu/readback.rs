//! `AsyncReadback`: several buffers' bytes through one staging buffer and
//! one mapping (`copy_at`), never blocking, and what it refuses.

use crate::harness::*;
use cull_core::AsyncReadback;
use wgpu::util::DeviceExt;

/// A source buffer holding `words`.
fn source(ctx: &cull_core::GpuContext, words: &[u32]) -> wgpu::Buffer {
    ctx.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("readback_source"),
        contents: bytemuck::cast_slice(words),
        usage: wgpu::BufferUsages::COPY_SRC,
    })
}

/// Polls `readback` (and the device) until its bytes arrive.
fn wait(ctx: &cull_core::GpuContext, readback: &AsyncReadback) -> (Vec<u32>, u64) {
    for _ in 0..1000 {
        if let Some((bytes, tag)) = readback.poll() {
            return (bytemuck::cast_slice(&bytes).to_vec(), tag);
        }
        ctx.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
    }
    panic!("the readback never arrived");
}

#[test]
fn copies_at_offsets_come_back_in_one_mapping() {
    let ctx = gpu();
    let readback = AsyncReadback::new(&ctx.device, 64, "readback_test");
    let (a, b) = (source(ctx, &[1, 2, 3, 4]), source(ctx, &[10, 20, 30, 40]));
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    // Two words of `a` from its second, at 0; three of `b` at 16.
    assert!(readback.copy_at(&mut encoder, (&a, 4, 8), 0, 7));
    assert!(readback.copy_at(&mut encoder, (&b, 0, 12), 16, 7));
    // Past the staging buffer's end, empty, or unaligned: refused, nothing
    // recorded.
    assert!(!readback.copy_at(&mut encoder, (&b, 0, 16), 52, 7));
    assert!(!readback.copy_at(&mut encoder, (&b, 0, 0), 32, 7));
    assert!(!readback.copy_at(&mut encoder, (&b, 2, 4), 32, 7));
    assert!(!readback.copy_at(&mut encoder, (&b, 0, 4), 34, 7));
    ctx.queue.submit([encoder.finish()]);
    // The first poll starts the mapping; no copy is taken meanwhile.
    assert!(readback.poll().is_none());
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    assert!(!readback.can_copy());
    assert!(!readback.copy_at(&mut encoder, (&a, 0, 4), 32, 8));
    let (words, tag) = wait(ctx, &readback);
    assert_eq!(tag, 7);
    // Up to the end of the farthest copy; the gap between is whatever the
    // staging buffer held.
    assert_eq!(words.len(), 7);
    assert_eq!(&words[..2], &[2, 3]);
    assert_eq!(&words[4..], &[10, 20, 30]);
    // Idle again: a new round of copies starts from nothing.
    assert!(readback.copy_at(&mut encoder, (&a, 12, 4), 8, 9));
    ctx.queue.submit([encoder.finish()]);
    let (words, tag) = wait(ctx, &readback);
    assert_eq!((words.len(), words[2], tag), (3, 4, 9));
}
