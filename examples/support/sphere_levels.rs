//! The spheres' levels of detail, and the field they stand in: ico-spheres
//! of decreasing detail, an octahedron, then one triangle facing the
//! camera, each drawn down to the size at which the next one's error
//! would show.

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The spheres' radius.
pub const SPHERE_RADIUS: f32 = 0.8;

/// The half width of the field [`sphere_field`] made, for the cameras that
/// look across it.
#[derive(Resource)]
pub struct FieldHalf(pub f32);

/// The field: a square grid of spheres on gently rolling ground, colored by position.
pub fn sphere_field(count: usize) -> (Vec<GpuCullInstance>, f32) {
    let side = (count as f32).sqrt().ceil() as usize;
    let spacing = 3.0;
    let half = side as f32 * spacing / 2.0;
    let instances = (0..count)
        .map(|i| {
            let (x, z) = (
                (i % side) as f32 * spacing - half,
                (i / side) as f32 * spacing - half,
            );
            let y = (x * 0.05).sin() * 2.0 + (z * 0.07).cos() * 2.0;
            let hue = ((x / half + 1.0) * 180.0 + (z / half) * 60.0).rem_euclid(360.0);
            let color = LinearRgba::from(Color::hsl(hue, 0.7, 0.55));
            GpuCullInstance {
                scale: 1.0,
                ..GpuCullInstance::new(Vec3::new(x, y, z), color)
            }
        })
        .collect();
    (instances, half)
}

/// The spheres' levels of detail, finest first: ico-spheres of 320, 80 and
/// 20 triangles (`Sphere::mesh().ico(2 | 1 | 0)`), an octahedron of 8
/// (`octahedron`), then an impostor: one triangle facing the camera
/// (`impostor`, `GpuCullLodLevel::facing_camera`). Each level is drawn down to the
/// size at which the next, coarser one strays from the sphere by at most
/// `LOD_ERROR` (`lod_thresholds`); spheres smaller than `LOD_CUT_OFF` are
/// not drawn. Sizes are fractions of the screen height (the bounding
/// sphere's diameter, as `GpuCullLod` measures), so the levels look the
/// same at any resolution.
pub const LOD_ERROR: f32 = 0.64 / 720.0;
/// The smallest size drawn: the bounding sphere a pixel across at 720
/// pixels (the drawn sphere 0.6 pixels).
pub const LOD_CUT_OFF: f32 = 0.0015;

/// How far a mesh strays from the sphere of radius `r` it stands for, as a
/// fraction of `r`: its farthest vertex outside the sphere, or its face
/// nearest the centre inside it, whichever is farther. For a mesh facing the
/// camera, what shows is its outline against the sphere's disc: its
/// farthest vertex from the centre in its plane, or its outline's edge
/// nearest the centre (a convex outline around the centre: its vertices in
/// order of angle).
fn sphere_error(mesh: &Mesh, r: f32, facing_camera: bool) -> f32 {
    use bevy::mesh::VertexAttributeValues;
    let Some(VertexAttributeValues::Float32x3(positions)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
        return f32::INFINITY;
    };
    let p: Vec<Vec3> = positions.iter().map(|p| Vec3::from_array(*p)).collect();
    if facing_camera {
        let mut outline: Vec<Vec2> = p.iter().map(|p| p.truncate()).collect();
        outline.sort_by(|a, b| a.to_angle().total_cmp(&b.to_angle()));
        let outside = outline.iter().map(|v| v.length() - r).fold(0.0, f32::max);
        let nearest_edge = (0..outline.len())
            .map(|i| {
                let (a, b) = (outline[i], outline[(i + 1) % outline.len()]);
                (b - a).perp().normalize().dot(a).abs()
            })
            .fold(f32::INFINITY, f32::min);
        return outside.max(r - nearest_edge) / r;
    }
    let outside = p.iter().map(|p| p.length() - r).fold(0.0, f32::max);
    let indices: Vec<usize> = mesh
        .indices()
        .map_or((0..p.len()).collect(), |i| i.iter().collect());
    let nearest_face = indices
        .chunks_exact(3)
        .map(|t| {
            let (a, b, c) = (p[t[0]], p[t[1]], p[t[2]]);
            (b - a).cross(c - a).normalize().dot(a).abs()
        })
        .fold(f32::INFINITY, f32::min);
    outside.max(r - nearest_face) / r
}

/// Each level's smallest size: where the next level's error (`sphere_error`
/// of a sphere of radius `r`, whose bounding sphere has radius `bound`)
/// reaches `LOD_ERROR`, then `LOD_CUT_OFF`. A size `s` is a bounding sphere
/// of radius `s / 2`, and so a drawn sphere of radius `s·r / (2·bound)`.
fn lod_thresholds(levels: &[(Mesh, bool)], r: f32, bound: f32) -> Vec<f32> {
    let sizes: Vec<f32> = levels
        .iter()
        .skip(1)
        .map(|(coarser, facing)| 2.0 * bound * LOD_ERROR / (r * sphere_error(coarser, r, *facing)))
        .chain([LOD_CUT_OFF])
        .collect();
    // Coarser meshes stray more: the sizes descend (GpuCullLod's rule).
    debug_assert!(sizes.windows(2).all(|w| w[0] > w[1]), "{sizes:?}");
    sizes
}

/// A mesh of `positions` shared by its `faces`, each wound
/// counter-clockwise seen from outside, with a sphere's normals (each
/// vertex's direction from the centre). At the sizes the coarse levels are
/// drawn (a few pixels) their shape does not show, and shared vertices run
/// the vertex shader once each, where Bevy's polyhedra give each face its
/// own vertices (flat normals): at 1M spheres the coarse levels are most of
/// the frame's vertices.
fn shared_vertex_mesh(positions: &[Vec3], faces: &[[u32; 3]]) -> Mesh {
    use bevy::asset::RenderAssetUsages;
    use bevy::mesh::{Indices, PrimitiveTopology};
    let mut indices = Vec::new();
    for &face in faces {
        let [a, b, c] = face.map(|i| positions[i as usize]);
        // Wound so that the face's normal points away from the centre.
        let outward = (b - a).cross(c - a).dot(a + b + c) > 0.0;
        indices.extend(if outward {
            face
        } else {
            [face[0], face[2], face[1]]
        });
    }
    let extent = positions
        .iter()
        .map(|p| p.abs().max_element())
        .fold(0.0, f32::max);
    let normals: Vec<[f32; 3]> = positions.iter().map(|p| p.normalize().to_array()).collect();
    let uvs: Vec<[f32; 2]> = positions
        .iter()
        .map(|p| {
            [
                0.5 + p.x.atan2(p.z) / std::f32::consts::TAU,
                0.5 - p.y / (2.0 * extent),
            ]
        })
        .collect();
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(indices))
        .with_inserted_attribute(
            Mesh::ATTRIBUTE_POSITION,
            positions.iter().map(|p| p.to_array()).collect::<Vec<_>>(),
        )
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// The second coarsest level: an octahedron of 8 triangles on 6 vertices
/// for a sphere of radius `r`, its vertices at `2r / (1 + 1/√3)` from the
/// centre so that they stray outside the sphere as far as its faces stray
/// inside (0.268 r). Within the sphere's bounding sphere (`√3 r`, around
/// its box), which is what culling tests.
fn octahedron(r: f32) -> Mesh {
    let a = 2.0 * r / (1.0 + 1.0 / 3f32.sqrt());
    let positions = [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z].map(|p| p * a);
    let faces: Vec<[u32; 3]> = [0u32, 1]
        .iter()
        .flat_map(|&x| [2u32, 3].map(move |y| [x, y]))
        .flat_map(|[x, y]| [4u32, 5].map(move |z| [x, y, z]))
        .collect();
    shared_vertex_mesh(&positions, &faces)
}

/// The coarsest level, an impostor: one triangle in the mesh's XY plane,
/// drawn facing the camera (`GpuCullLodLevel::facing_camera`), its corners at
/// `4r/3` from the centre so that they stray outside the sphere's disc as
/// far as its edges stray inside (`r/3`). Its normals lean out from the
/// centre, so that it is lit like the sphere it stands for, brighter on the
/// side facing the light. It replaced a tetrahedron (4 triangles on 4
/// vertices, straying 0.567 r): the impostor is drawn from larger sizes
/// with one triangle and 3 vertices.
pub fn impostor(r: f32) -> Mesh {
    use bevy::asset::RenderAssetUsages;
    use bevy::mesh::{Indices, PrimitiveTopology};
    let a = 4.0 * r / 3.0;
    // Counter-clockwise seen from +Z, the side that faces the camera.
    let corners: Vec<Vec2> = [90.0f32, 210.0, 330.0]
        .iter()
        .map(|deg| Vec2::from_angle(deg.to_radians()))
        .collect();
    let positions: Vec<[f32; 3]> = corners.iter().map(|c| (*c * a).extend(0.0).to_array()).collect();
    let normals: Vec<[f32; 3]> = corners
        .iter()
        .map(|c| c.extend(0.5).normalize().to_array())
        .collect();
    let uvs: Vec<[f32; 2]> = corners
        .iter()
        .map(|c| [0.5 + 0.5 * c.x, 0.5 - 0.5 * c.y])
        .collect();
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(vec![0, 1, 2]))
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// The spheres' levels ([`LOD_ERROR`], [`LOD_CUT_OFF`]), `finest` (the
/// batch's own mesh) first, cross-fading over `cross_fade`
/// (`GpuCullLod::with_cross_fade`, 0 to switch at each threshold).
pub fn sphere_levels(meshes: &mut Assets<Mesh>, finest: Handle<Mesh>, cross_fade: f32) -> GpuCullLod {
    use bevy::camera::primitives::MeshAabb;
    let r = SPHERE_RADIUS;
    let ico = |n| Sphere::new(r).mesh().ico(n).expect("a small icosphere");
    let levels = [
        (ico(2), false),
        (ico(1), false),
        (ico(0), false),
        (octahedron(r), false),
        (impostor(r), true),
    ];
    // GpuCullBounds: the sphere around the box around the finest mesh.
    let bound = Vec3::from(
        levels[0]
            .0
            .compute_aabb()
            .expect("a mesh with positions")
            .half_extents,
    )
    .length();
    let thresholds = lod_thresholds(&levels, r, bound);
    GpuCullLod::new(
        levels
            .into_iter()
            .zip(thresholds)
            .enumerate()
            .map(|(k, ((level, facing), size))| {
                let handle = if k == 0 { finest.clone() } else { meshes.add(level) };
                let level = GpuCullLodLevel::new(handle, size);
                if facing { level.facing_camera() } else { level }
            }),
    )
    .with_cross_fade(cross_fade)
}
