//! The order in which a draw goes through its survivors
//! (`shaders/gpu_cull_draw_order.wgsl`): a permutation of every list, run
//! on the GPU against its CPU mirror; a batch whose two levels' lists are
//! drawn in that order shows every instance where it stands, in its own
//! color; and pairs of instances in the same place show the one drawn last
//! in that order (opaque), or in the list's order (blended, sorted back to
//! front).

use crate::common::{FrameApp, image_target};
use bevy::camera::{ImageRenderTarget, RenderTarget, ScalingMode};
use bevy::core_pipeline::tonemapping::{DebandDither, Tonemapping};
use bevy::prelude::*;
use bevy::render::gpu_readback::Readback;
use bevy_gpu_cull::prelude::*;
use wgpu::util::DeviceExt;

const DRAW_ORDER: &str = include_str!("../../src/render/shaders/gpu_cull_draw_order.wgsl");

/// A `const NAME: u32 = Nu;` of the shader.
fn shader_const(name: &str) -> u32 {
    let line = DRAW_ORDER
        .lines()
        .find(|l| l.starts_with(&format!("const {name}: u32 = ")))
        .unwrap_or_else(|| panic!("{name} is declared"));
    let value = line.rsplit("= ").next().unwrap().trim_end_matches("u;");
    value.parse().unwrap()
}

/// The shader's order on the CPU.
fn spread_draw_order(i: u32, count: u32) -> u32 {
    let (tracks, run_length) = (shader_const("DRAW_ORDER_TRACKS"), shader_const("DRAW_ORDER_RUN"));
    let runs = (count / run_length) & !(tracks - 1);
    let run = i / run_length;
    if run >= runs {
        return i;
    }
    let row_length = runs / tracks;
    ((run % tracks) * row_length + run / tracks) * run_length + i % run_length
}

/// Each draw's place in a list of `count`, as the shader computes it.
fn gpu_order(gpu: &cull_core::GpuContext, count: u32) -> Vec<u32> {
    let module: String = DRAW_ORDER
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let source = module
        + "
@group(0) @binding(0) var<uniform> count: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < count.x {
        order[id.x] = spread_draw_order(id.x, count.x);
    }
}";
    let device = &gpu.device;
    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("draw_order_test"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &shader,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: bytemuck::cast_slice(&[count, 0, 0, 0]),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let size = 4 * count.max(1) as u64;
    let order = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: order.as_entire_binding(),
            },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(count.div_ceil(64).max(1), 1, 1);
    }
    gpu.queue.submit([encoder.finish()]);
    let bytes = cull_core::read_back(device, &gpu.queue, &order, 0, size).expect("the order reads back");
    bytemuck::pod_collect_to_vec::<u8, u32>(&bytes)[..count as usize].to_vec()
}

#[test]
fn the_draw_order_is_a_permutation_of_every_list() {
    let gpu = cull_core::GpuContext::new(wgpu::Backends::all(), wgpu::Features::empty()).expect("an adapter");
    let (tracks, run_length) = (shader_const("DRAW_ORDER_TRACKS"), shader_const("DRAW_ORDER_RUN"));
    let spread_from = tracks * run_length;
    for count in [
        1,
        3,
        spread_from - 1,
        spread_from,
        spread_from + 1,
        1000,
        4099,
        70_001,
        1_000_003,
    ] {
        let order = gpu_order(&gpu, count);
        let differs = (0..count).find(|&i| order[i as usize] != spread_draw_order(i, count));
        assert_eq!(
            differs, None,
            "{count} survivors: the GPU's order differs from its mirror at this draw"
        );
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert!(
            sorted.iter().copied().eq(0..count),
            "{count} survivors: the order is not a permutation"
        );
        if count >= 2 * spread_from {
            // What the order is for: consecutive runs are drawn from places
            // a whole track apart.
            let apart = order[run_length as usize].abs_diff(order[0]);
            assert!(
                apart >= count / tracks - run_length,
                "{count} survivors: the second run is {apart} places from the first"
            );
        }
    }
}

/// The flat tile every instance of these scenes is, unlit, and its
/// material of `alpha_mode`.
fn tile(world: &mut World, alpha_mode: AlphaMode) -> (Handle<Mesh>, MeshMaterial3d<StandardMaterial>) {
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(1.6, 0.2, 1.6));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            unlit: true,
            alpha_mode,
            ..default()
        });
    (mesh, MeshMaterial3d(material))
}

/// Draws `frame_app`'s batch (tiles on the ground around the origin) from
/// straight above, `side` world units across a frame of `size`², until
/// the batch is drawn with all of its `count` instances in view; returns
/// the frame (saved as `png`), for each of `places` its pixel's index, and
/// the survivors per level of a batch with levels.
fn draw_from_above(
    mut frame_app: FrameApp,
    (size, side): (u32, f32),
    png: &str,
    count: u32,
    places: impl Iterator<Item = Vec3>,
) -> (Vec<u8>, Vec<usize>, Option<Vec<u32>>) {
    let world = frame_app.app.world_mut();
    let target = image_target(world, size, size);
    let projection = OrthographicProjection {
        scaling_mode: ScalingMode::Fixed {
            width: side,
            height: side,
        },
        ..OrthographicProjection::default_3d()
    };
    let camera = world
        .spawn((
            Camera3d::default(),
            Projection::from(projection),
            RenderTarget::Image(ImageRenderTarget {
                handle: target.clone(),
                scale_factor: 1.0,
            }),
            Tonemapping::None,
            DebandDither::Disabled,
            Msaa::Off,
            Transform::from_xyz(0.0, 10.0, 0.0).looking_at(Vec3::ZERO, Vec3::NEG_Z),
        ))
        .id();
    world.spawn(Readback::texture(target));
    frame_app.app.finish();
    frame_app.app.cleanup();
    let frame = frame_app.frame_when(size, size, png, |world| {
        let stats = world.resource::<GpuCullStats>();
        stats.drawn_frames > 5 && stats.visible.values().sum::<u32>() == count
    });
    let world = frame_app.app.world_mut();
    let (view, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .expect("the camera");
    let pixels = places
        .map(|place| {
            // The tile's top face.
            let at = view
                .world_to_viewport(transform, place + Vec3::Y * 0.1)
                .expect("in view");
            ((at.y as u32 * size + at.x as u32) * 4) as usize
        })
        .collect();
    let stats = frame_app.app.world().resource::<GpuCullStats>();
    let per_level = stats.visible_per_level.values().next().cloned();
    (frame, pixels, per_level)
}

/// The grid's side, in instances.
const SIDE: u32 = 48;
/// The grid's rows of smaller instances, drawn as the second level.
const SMALL_ROWS: u32 = 16;

/// Instance `k`'s place (cells 2 units apart around the origin), scale
/// (the last rows smaller) and color (red along x, green along z).
fn grid_instance(k: u32) -> GpuCullInstance {
    let (column, row) = (k % SIDE, k / SIDE);
    let place = |c: u32| c as f32 * 2.0 - (SIDE - 1) as f32;
    let level = |c: u32| c as f32 / (SIDE - 1) as f32;
    let color = LinearRgba::rgb(level(column), level(row), 0.5);
    GpuCullInstance {
        scale: if row >= SIDE - SMALL_ROWS { 0.8 } else { 1.0 },
        ..GpuCullInstance::new(Vec3::new(place(column), 0.0, place(row)), color)
    }
}

#[test]
fn a_spread_draw_shows_every_instance_in_its_own_place_and_color() {
    let mut frame_app = FrameApp::new();
    let world = frame_app.app.world_mut();
    let (mesh, material) = tile(world, AlphaMode::Opaque);
    // Two levels of the same mesh, by size: 1,536 instances, then 768,
    // each list drawn spread (as rows of 6 and of 3 runs), so that the
    // second level's draw reading the first's count would draw survivors
    // its list does not hold. The bounding sphere spans 0.0238 of the
    // view's height at scale 1, 0.019 at 0.8.
    let levels = GpuCullLod::new([
        GpuCullLodLevel::new(mesh.clone(), 0.0215),
        GpuCullLodLevel::new(mesh.clone(), 0.0),
    ]);
    let instances = (0..SIDE * SIDE).map(grid_instance).collect();
    world.spawn((Mesh3d(mesh), material, GpuCullInstances::new(instances), levels));
    let places = (0..SIDE * SIDE).map(|k| grid_instance(k).position);
    let png = "gpu-cull-draw-order.png";
    let (frame, pixels, per_level) = draw_from_above(frame_app, (384, 96.0), png, SIDE * SIDE, places);
    assert_eq!(
        per_level,
        Some(vec![(SIDE - SMALL_ROWS) * SIDE, SMALL_ROWS * SIDE]),
        "the levels split the grid as the test needs"
    );
    for (k, &i) in pixels.iter().enumerate() {
        let expected = Srgba::from(LinearRgba::from_f32_array(grid_instance(k as u32).color)).to_u8_array();
        let difference = (0..3).map(|c| frame[i + c].abs_diff(expected[c])).max().unwrap();
        assert!(
            difference <= 2,
            "instance {k}: {:?}, expected {expected:?} (see {png} in the temporary directory)",
            &frame[i..i + 4]
        );
    }
}

/// Where the pairs' instances stand: a grid of `PAIR_SIDE`² cells, each
/// cell twice.
const PAIR_SIDE: u32 = 30;

/// Cell `c`'s place.
fn pair_place(c: u32) -> Vec3 {
    let at = |i: u32| i as f32 * 2.0 - (PAIR_SIDE - 1) as f32;
    Vec3::new(at(c % PAIR_SIDE), 0.0, at(c / PAIR_SIDE))
}

/// Draws the pairs' batch (cell `c`'s first instance at list place `c`,
/// blue, its second at `cells + c`, yellow) with an ordered scan, so that
/// the survivors are in the list's order, and returns the frame and, per
/// cell, its pixel.
fn draw_pairs(alpha_mode: AlphaMode) -> (Vec<u8>, Vec<usize>) {
    let mut frame_app = FrameApp::new();
    frame_app.app.insert_resource(GpuCullSettings {
        variant: Some(GpuCullScanVariant::Ordered),
        ..default()
    });
    let world = frame_app.app.world_mut();
    let (mesh, material) = tile(world, alpha_mode);
    let cells = PAIR_SIDE * PAIR_SIDE;
    let instances = (0..2 * cells)
        .map(|k| {
            let color = if k < cells {
                LinearRgba::BLUE
            } else {
                LinearRgba::rgb(1.0, 1.0, 0.0)
            };
            GpuCullInstance::new(pair_place(k % cells), color)
        })
        .collect();
    world.spawn((Mesh3d(mesh), material, GpuCullInstances::new(instances)));
    let view = (240, 2.0 * PAIR_SIDE as f32);
    let png = "gpu-cull-draw-order-pairs.png";
    let (frame, pixels, _) = draw_from_above(frame_app, view, png, 2 * cells, (0..cells).map(pair_place));
    (frame, pixels)
}

#[test]
fn pairs_in_one_place_show_the_instance_drawn_last() {
    let cells = PAIR_SIDE * PAIR_SIDE;
    let count = 2 * cells;
    // Each survivor's draw: the inverse of the order.
    let mut drawn_at = vec![0; count as usize];
    for i in 0..count {
        drawn_at[spread_draw_order(i, count) as usize] = i;
    }
    let second_last = |c: u32| drawn_at[(cells + c) as usize] > drawn_at[c as usize];
    let seconds = (0..cells).filter(|&c| second_last(c)).count();
    assert!(
        seconds > 0 && seconds < cells as usize,
        "the order draws either instance of a pair last ({seconds} of {cells} the second)"
    );
    let is_yellow = |p: &[u8]| p[0] > 200 && p[1] > 200 && p[2] < 60;
    let is_blue = |p: &[u8]| p[0] < 60 && p[1] < 60 && p[2] > 200;
    // Opaque, depth-tested: the later draw of two equal depths wins.
    let (frame, pixels) = draw_pairs(AlphaMode::Opaque);
    for c in 0..cells {
        let p = &frame[pixels[c as usize]..pixels[c as usize] + 4];
        let (expected, shows) = if second_last(c) {
            ("yellow", is_yellow(p))
        } else {
            ("blue", is_blue(p))
        };
        assert!(
            shows,
            "opaque cell {c}: {p:?}, expected {expected} (drawn last in the spread order)"
        );
    }
    // Blended: sorted back to front, ties in the list's order, drawn in it.
    let (frame, pixels) = draw_pairs(AlphaMode::Blend);
    for c in 0..cells {
        let p = &frame[pixels[c as usize]..pixels[c as usize] + 4];
        assert!(
            is_yellow(p),
            "blended cell {c}: {p:?}, expected yellow (the list's order)"
        );
    }
}
