//! `--pass-times`: GPU time spans around the work Bevy 0.19's render
//! diagnostics leave untimed: a camera's directional shadow passes (early
//! and late, each span covering every cascade drawn in the camera's run;
//! with several cameras, the last one's), and the whole frame's GPU work,
//! from the first command of the render graph to the last (the passes' own
//! spans lie inside it; what they do not cover is the rest). The spans
//! order Bevy's early shadow passes after its early prepass, which Bevy
//! leaves unordered.
//! They are reported beside Bevy's own, as `render/frame/elapsed_gpu`,
//! `render/early_shadow_passes/elapsed_gpu` and
//! `render/late_shadow_passes/elapsed_gpu` (ms). Timestamps of the
//! frame's command stream, read back a few frames late; nothing where the
//! adapter cannot write timestamps between passes.

use bevy::core_pipeline::mip_generation::experimental::depth::early_downsample_depth;
use bevy::core_pipeline::prepass::node::{early_prepass, late_prepass};
use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::pbr::{
    EARLY_SHADOW_PASS, LATE_SHADOW_PASS, early_prepass_build_indirect_parameters,
    late_prepass_build_indirect_parameters, main_build_indirect_parameters, per_view_shadow_pass,
    shared_shadow_pass,
};
use bevy::prelude::*;
use bevy::render::camera::ExtractedCamera;
use bevy::render::render_resource::{Buffer, BufferDescriptor, BufferUsages, MapMode};
use bevy::render::renderer::{
    RenderContext, RenderDevice, RenderGraph, RenderGraphSystems, RenderQueue, ViewQuery,
};
use bevy::render::{RenderApp, RenderStartup};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// The spans, each timed from timestamp `2 i` to `2 i + 1` of [`STAMPS`].
const PATHS: [DiagnosticPath; 3] = [
    DiagnosticPath::const_new("render/frame/elapsed_gpu"),
    DiagnosticPath::const_new("render/early_shadow_passes/elapsed_gpu"),
    DiagnosticPath::const_new("render/late_shadow_passes/elapsed_gpu"),
];
const STAMPS: u32 = 6;
/// Every timestamp written in a frame (a frame without a camera has none
/// of the shadow passes' and is not read back).
const ALL_WRITTEN: u32 = (1 << STAMPS) - 1;
/// Readback buffers in flight.
const READBACKS: usize = 4;

/// Adds the spans to an app with Bevy's `RenderDiagnosticsPlugin`.
pub fn add_untimed_spans(app: &mut App) {
    for path in PATHS {
        app.register_diagnostic(Diagnostic::new(path).with_suffix("ms"));
    }
    let times = SpanTimes::default();
    app.insert_resource(times.clone())
        .add_systems(PreUpdate, publish_span_times);
    let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
        return;
    };
    render_app
        .insert_resource(times)
        .add_systems(RenderStartup, init_span_queries)
        .add_systems(
            RenderGraph,
            (
                stamp::<0>.in_set(RenderGraphSystems::Begin),
                (stamp::<1>, read_back_spans)
                    .chain()
                    .after(RenderGraphSystems::Render)
                    .before(RenderGraphSystems::Submit),
            ),
        );
    // The early shadow passes, after the camera's prepass (so after its
    // cull, which the plugin runs before it) and Bevy's indirect
    // parameters, so that the span holds the shadow draws alone; the late
    // ones likewise, after the late prepass.
    render_app.add_systems(
        Core3d,
        (
            camera_stamp::<2>
                .after(early_prepass)
                .after(early_prepass_build_indirect_parameters)
                .before(per_view_shadow_pass::<EARLY_SHADOW_PASS>)
                .before(shared_shadow_pass::<EARLY_SHADOW_PASS>),
            camera_stamp::<3>
                .after(per_view_shadow_pass::<EARLY_SHADOW_PASS>)
                .after(shared_shadow_pass::<EARLY_SHADOW_PASS>)
                .before(early_downsample_depth),
            camera_stamp::<4>
                .after(late_prepass)
                .after(late_prepass_build_indirect_parameters)
                .before(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                .before(shared_shadow_pass::<LATE_SHADOW_PASS>),
            camera_stamp::<5>
                .after(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                .after(shared_shadow_pass::<LATE_SHADOW_PASS>)
                .before(main_build_indirect_parameters)
                .before(Core3dSystems::MainPass),
        ),
    );
}

/// Span times (ms) read back in the render world, for the main world.
#[derive(Resource, Clone, Default)]
struct SpanTimes(Arc<Mutex<Vec<[f64; 3]>>>);

/// The timestamps' query set and where they are read back.
#[derive(Resource)]
struct SpanQueries {
    set: wgpu::QuerySet,
    resolved: Buffer,
    readbacks: Vec<(Buffer, Arc<AtomicU8>)>,
    /// Bit `i`: timestamp `i` was written this frame.
    written: u32,
    period_ns: f64,
}

/// A readback buffer free for the next frame's timestamps.
const FREE: u8 = 0;
/// A readback buffer copied into, waiting for its mapping.
const PENDING: u8 = 1;
/// A readback buffer mapped, to be read and unmapped.
const MAPPED: u8 = 2;

fn init_span_queries(mut commands: Commands, device: Res<RenderDevice>, queue: Res<RenderQueue>) {
    let needed = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    if !device.features().contains(needed) {
        warn!("--pass-times: this adapter cannot time the shadow passes and the frame");
        return;
    }
    let set = device.wgpu_device().create_query_set(&wgpu::QuerySetDescriptor {
        label: Some("untimed_spans"),
        ty: wgpu::QueryType::Timestamp,
        count: STAMPS,
    });
    let buffer = |usage| {
        device.create_buffer(&BufferDescriptor {
            label: Some("untimed_spans"),
            size: 8 * u64::from(STAMPS),
            usage,
            mapped_at_creation: false,
        })
    };
    let readbacks = (0..READBACKS)
        .map(|_| {
            (
                buffer(BufferUsages::MAP_READ | BufferUsages::COPY_DST),
                Arc::default(),
            )
        })
        .collect();
    commands.insert_resource(SpanQueries {
        set,
        resolved: buffer(BufferUsages::QUERY_RESOLVE | BufferUsages::COPY_SRC),
        readbacks,
        written: 0,
        period_ns: f64::from(queue.get_timestamp_period()),
    });
}

/// Writes timestamp `I` into the frame's command stream.
fn stamp<const I: u32>(mut ctx: RenderContext, queries: Option<ResMut<SpanQueries>>) {
    write_stamp(I, &mut ctx, queries);
}

/// [`stamp`] in a camera's run of `Core3d` only (point and spot lights'
/// views run it too, before the cameras).
fn camera_stamp<const I: u32>(
    _camera: ViewQuery<(), With<ExtractedCamera>>,
    mut ctx: RenderContext,
    queries: Option<ResMut<SpanQueries>>,
) {
    write_stamp(I, &mut ctx, queries);
}

fn write_stamp(index: u32, ctx: &mut RenderContext, queries: Option<ResMut<SpanQueries>>) {
    if let Some(mut queries) = queries {
        ctx.command_encoder().write_timestamp(&queries.set, index);
        queries.written |= 1 << index;
    }
}

/// Takes the spans of the frames read back, then queues this frame's.
fn read_back_spans(mut ctx: RenderContext, queries: Option<ResMut<SpanQueries>>, times: Res<SpanTimes>) {
    let Some(mut queries) = queries else {
        return;
    };
    for (buffer, state) in &queries.readbacks {
        if state.load(Ordering::Acquire) != MAPPED {
            continue;
        }
        let stamps: Vec<u64> = buffer
            .slice(..)
            .get_mapped_range()
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        buffer.unmap();
        state.store(FREE, Ordering::Release);
        let ms = |i: usize| stamps[2 * i + 1].saturating_sub(stamps[2 * i]) as f64 * queries.period_ns * 1e-6;
        times
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push([ms(0), ms(1), ms(2)]);
    }
    let written = std::mem::take(&mut queries.written);
    let free = queries
        .readbacks
        .iter()
        .find(|(_, state)| state.load(Ordering::Acquire) == FREE);
    let (Some((buffer, state)), true) = (free, written == ALL_WRITTEN) else {
        return;
    };
    let encoder = ctx.command_encoder();
    encoder.resolve_query_set(&queries.set, 0..STAMPS, &queries.resolved, 0);
    encoder.copy_buffer_to_buffer(&queries.resolved, 0, buffer, 0, None);
    state.store(PENDING, Ordering::Release);
    let state = state.clone();
    encoder.map_buffer_on_submit(buffer, MapMode::Read, .., move |result| {
        state.store(if result.is_ok() { MAPPED } else { FREE }, Ordering::Release);
    });
}

/// Adds the spans read back to the app's diagnostics.
fn publish_span_times(times: Res<SpanTimes>, mut diagnostics: Diagnostics) {
    let frames = std::mem::take(&mut *times.0.lock().unwrap_or_else(|e| e.into_inner()));
    for frame in frames {
        for (path, ms) in PATHS.iter().zip(frame) {
            diagnostics.add_measurement(path, || ms);
        }
    }
}
