//! The forest's parts: a streaked texture, a deterministic scatter, and
//! the meshes of its trees and rocks at each level of detail.

use bevy::asset::RenderAssetUsages;
use bevy::prelude::*;
use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat};
use bevy_gpu_cull::GpuCullInstance;

/// A small tileable texture: `base` with darker streaks, so that the
/// material's texture is visible on the instances.
pub fn streaks(base: [u8; 3]) -> Image {
    let size = 16;
    let mut data = Vec::with_capacity(size * size * 4);
    for y in 0..size {
        for x in 0..size {
            let dark = (x * 7 + y * 3) % 5 == 0;
            let k = if dark { 0.55 } else { 1.0 };
            data.extend(base.map(|c| (c as f32 * k) as u8));
            data.push(255);
        }
    }
    Image::new(
        Extent3d {
            width: size as u32,
            height: size as u32,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        data,
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::RENDER_WORLD,
    )
}

/// A deterministic scatter: `i`-th point of a golden-angle spiral in a disc
/// of radius `radius`, with a pseudo-random jitter, scale and turn.
pub fn scatter(i: usize, count: usize, radius: f32, seed: u32) -> (Vec3, f32, f32) {
    let hash =
        |n: u32| (n.wrapping_mul(0x9E37_79B9) ^ seed).wrapping_mul(0x85EB_CA6B) as f32 / u32::MAX as f32;
    let r = radius * ((i as f32 + 0.5) / count as f32).sqrt();
    let a = i as f32 * 2.399_963;
    let jitter = Vec3::new(hash(i as u32) - 0.5, 0.0, hash(i as u32 ^ 0x55) - 0.5) * 2.0;
    let p = Vec3::new(r * a.cos(), 0.0, r * a.sin()) + jitter;
    (
        p,
        0.7 + 0.8 * hash(i as u32 ^ 0xAA),
        hash(i as u32 ^ 0x33) * std::f32::consts::TAU,
    )
}

/// A tree: a cone of `sides` sides (8 for the finest level, 4 for the next).
pub fn tree_cone(sides: u32) -> Mesh {
    Cone::new(0.9, 3.0).mesh().resolution(sides).build()
}

/// A rock: an icosphere of `subdivisions` (0: an icosahedron).
pub fn rock(subdivisions: u32) -> Mesh {
    Sphere::new(0.6)
        .mesh()
        .ico(subdivisions)
        .expect("a small icosphere")
}

/// A tree's outline as one triangle in the XY plane, facing +Z (the
/// camera, drawn with `GpuCullLodLevel::facing_camera`), as tall and wide as the
/// cone, with normals leaning out so that it shades like a cone.
pub fn flat_tree() -> Mesh {
    use bevy::mesh::{Indices, PrimitiveTopology};
    let positions = vec![[-0.9, -1.5, 0.0], [0.9, -1.5, 0.0], [0.0, 1.5, 0.0]];
    let normals: Vec<[f32; 3]> = [
        Vec3::new(-1.0, 0.3, 1.0),
        Vec3::new(1.0, 0.3, 1.0),
        Vec3::new(0.0, 0.3, 1.0),
    ]
    .iter()
    .map(|n| n.normalize().to_array())
    .collect();
    let uvs = vec![[0.0, 1.0], [1.0, 1.0], [0.5, 0.0]];
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(vec![0, 1, 2]))
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// A square ground `size` across, its heights from `height(x, z)`, with
/// smooth normals.
pub fn bent_ground(size: f32, height: fn(f32, f32) -> f32) -> Mesh {
    let mut ground = Plane3d::default()
        .mesh()
        .size(size, size)
        .subdivisions(96)
        .build();
    if let Some(bevy::mesh::VertexAttributeValues::Float32x3(positions)) =
        ground.attribute_mut(Mesh::ATTRIBUTE_POSITION)
    {
        for p in positions.iter_mut() {
            p[1] = height(p[0], p[2]);
        }
    }
    ground.compute_smooth_normals();
    ground
}

/// `count` instances scattered over a disc of `radius` (seeded by `seed`),
/// each placed by `place` from its scatter point, scale and turn.
pub fn scattered(
    count: usize,
    radius: f32,
    seed: u32,
    place: impl Fn(Vec3, f32, f32) -> Transform,
) -> Vec<GpuCullInstance> {
    let at = |i| {
        let (p, s, turn) = scatter(i, count, radius, seed);
        // White: Bevy's entity path (`--compare bevy`) has one material for
        // all, so both draw the same picture; a tint per instance would cost
        // the plugin an interpolated color that Bevy's path does not pay.
        GpuCullInstance::from_transform(&place(p, s, turn), Color::WHITE)
    };
    (0..count).map(at).collect()
}
