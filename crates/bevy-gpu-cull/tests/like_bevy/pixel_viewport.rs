//! A level drawn as pixels (`GpuCullLodLevel::as_pixels`) in a camera
//! whose viewport is a part of its target, as Bevy draws a split screen:
//! the viewport holds the same picture as a target of the viewport's size
//! (the splat's pixels, the tiles they are shaded over and the pixels'
//! depth all count from the viewport's corner), and that picture is the
//! pixel level's, not the triangles'. The same spheres dealt over many
//! batches, which share the view's tiles, draw the same picture.

use crate::common::{FrameApp, image_target};
use bevy::camera::{ImageRenderTarget, RenderTarget, Viewport};
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

const WIDTH: u32 = 96;
const HEIGHT: u32 = 56;
/// Where the viewport lies in the larger target: off the tiles' grid of 16.
const CORNER: UVec2 = UVec2::new(37, 5);

/// Far spheres on a grid, each a pixel or two across.
fn far_spheres() -> Vec<GpuCullInstance> {
    (0..40 * 12)
        .map(|i| {
            let (x, z) = ((i % 40) as f32, (i / 40) as f32);
            let position = Vec3::new((x - 19.5) * 1.6, 0.4, -30.0 - 4.0 * z);
            GpuCullInstance::new(position, LinearRgba::WHITE)
        })
        .collect()
}

/// How the spheres are drawn.
#[derive(Clone, Copy)]
struct Spheres {
    as_pixels: bool,
    /// Dealt over this many batches in turn, each with the same material.
    batches: usize,
}

const PIXELS: Spheres = Spheres {
    as_pixels: true,
    batches: 1,
};

/// The scene drawn into a target of `target` pixels, through a viewport of
/// `WIDTH` x `HEIGHT` at `corner` where given; returns the viewport's
/// pixels (rows of `WIDTH` RGBA pixels).
fn draw(target: UVec2, corner: Option<UVec2>, spheres: Spheres, png: &str) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    let world = frame_app.app.world_mut();
    super::spawn_ground(world, 400.0, Color::srgb(0.2, 0.25, 0.2));
    world.spawn((
        DirectionalLight {
            illuminance: 8000.0,
            ..default()
        },
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.4).mesh().ico(1).unwrap());
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::srgb(0.95, 0.2, 0.1)));
    let level = GpuCullLodLevel::new(mesh.clone(), 0.0);
    let level = if spheres.as_pixels {
        level.as_pixels()
    } else {
        level
    };
    let all = far_spheres();
    for b in 0..spheres.batches {
        let dealt = all.iter().skip(b).step_by(spheres.batches).copied().collect();
        world.spawn((
            Mesh3d(mesh.clone()),
            MeshMaterial3d(material.clone()),
            GpuCullInstances::new(dealt),
            GpuCullLod::new([level.clone()]),
        ));
    }
    let image = image_target(world, target.x, target.y);
    world.spawn((
        Camera3d::default(),
        Camera {
            clear_color: ClearColorConfig::Custom(Color::srgb(0.3, 0.4, 0.6)),
            viewport: corner.map(|physical_position| Viewport {
                physical_position,
                physical_size: UVec2::new(WIDTH, HEIGHT),
                ..default()
            }),
            ..default()
        },
        RenderTarget::Image(ImageRenderTarget {
            handle: image.clone(),
            scale_factor: 1.0,
        }),
        Msaa::Off,
        Transform::from_xyz(0.0, 1.5, 0.0).looking_at(Vec3::new(0.0, 0.4, -40.0), Vec3::Y),
    ));
    world.spawn(bevy::render::gpu_readback::Readback::texture(image));
    frame_app.app.finish();
    frame_app.app.cleanup();
    let frame = frame_app.frame_when(target.x, target.y, png, |world| {
        world.resource::<GpuCullStats>().drawn_frames > 5
    });
    let corner = corner.unwrap_or(UVec2::ZERO);
    let row = target.x as usize * 4;
    (0..HEIGHT as usize)
        .flat_map(|y| {
            let start = (corner.y as usize + y) * row + corner.x as usize * 4;
            frame[start..start + WIDTH as usize * 4].to_vec()
        })
        .collect()
}

/// Pixels whose red stands out: the spheres'.
fn sphere_pixels(frame: &[u8]) -> usize {
    frame
        .chunks(4)
        .filter(|p| p[0] > 120 && p[0] > p[1].saturating_add(60))
        .count()
}

#[test]
fn pixel_levels_land_in_a_cameras_viewport() {
    let _one = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let size = UVec2::new(WIDTH, HEIGHT);
    let alone = draw(size, None, PIXELS, "pixel-viewport-alone.png");
    let in_viewport = draw(
        size + CORNER + UVec2::new(21, 9),
        Some(CORNER),
        PIXELS,
        "pixel-viewport-in.png",
    );
    let triangles = Spheres {
        as_pixels: false,
        ..PIXELS
    };
    let triangles = draw(size, None, triangles, "pixel-viewport-triangles.png");
    let spheres = sphere_pixels(&alone);
    assert!(spheres > 100, "only {spheres} sphere pixels");
    assert_eq!(
        differing(&alone, &in_viewport),
        0,
        "pixels differ between the viewport and a target of its size"
    );
    let unlike_triangles = alone
        .chunks(4)
        .zip(triangles.chunks(4))
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        unlike_triangles > 20,
        "the pixel level drew as its triangles ({unlike_triangles} pixels differ)"
    );
}

/// Pixels of two frames more than 2 of 255 apart in a channel.
fn differing(a: &[u8], b: &[u8]) -> usize {
    a.chunks(4)
        .zip(b.chunks(4))
        .filter(|(a, b)| a.iter().zip(b.iter()).any(|(x, y)| x.abs_diff(*y) > 2))
        .count()
}

/// The spheres dealt over 40 batches (more than one word of the tiles'
/// batch mask, each tile holding many batches' pixels): every batch's
/// pixels are shaded over its own tiles, the same picture as one batch's
/// (the spheres share a material and their light does not depend on where
/// they stand, so whichever wins a pixel shows the same color).
#[test]
fn pixel_levels_of_many_batches_share_the_views_tiles() {
    let _one = super::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let size = UVec2::new(WIDTH, HEIGHT);
    let one = draw(size, None, PIXELS, "pixel-batches-one.png");
    let many = Spheres {
        batches: 40,
        ..PIXELS
    };
    let many = draw(size, None, many, "pixel-batches-many.png");
    assert!(
        sphere_pixels(&one) > 100,
        "only {} sphere pixels",
        sphere_pixels(&one)
    );
    assert_eq!(
        differing(&one, &many),
        0,
        "40 batches draw another picture than one"
    );
}
