//! A level drawn as pixels (`GpuCullLodLevel::as_pixels`) in a camera
//! whose viewport is a part of its target, as Bevy draws a split screen:
//! the viewport holds the same picture as a target of the viewport's size
//! (the splat's pixels, the tiles they are shaded over and the pixels'
//! depth all count from the viewport's corner), and that picture is the
//! pixel level's, not the triangles'.

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

/// The scene drawn into a target of `target` pixels, through a viewport of
/// `WIDTH` x `HEIGHT` at `corner` where given; returns the viewport's
/// pixels (rows of `WIDTH` RGBA pixels).
fn draw(target: UVec2, corner: Option<UVec2>, as_pixels: bool, png: &str) -> Vec<u8> {
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
    let level = if as_pixels { level.as_pixels() } else { level };
    world.spawn((
        Mesh3d(mesh),
        MeshMaterial3d(material),
        GpuCullInstances::new(far_spheres()),
        GpuCullLod::new([level]),
    ));
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
    let alone = draw(size, None, true, "pixel-viewport-alone.png");
    let in_viewport = draw(
        size + CORNER + UVec2::new(21, 9),
        Some(CORNER),
        true,
        "pixel-viewport-in.png",
    );
    let triangles = draw(size, None, false, "pixel-viewport-triangles.png");
    let spheres = sphere_pixels(&alone);
    assert!(spheres > 100, "only {spheres} sphere pixels");
    let moved = alone
        .chunks(4)
        .zip(in_viewport.chunks(4))
        .filter(|(a, b)| a.iter().zip(b.iter()).any(|(x, y)| x.abs_diff(*y) > 2))
        .count();
    assert_eq!(
        moved, 0,
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
