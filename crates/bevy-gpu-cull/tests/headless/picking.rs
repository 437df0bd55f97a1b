//! Picking through `bevy_picking`: a pointer moved over a pixel of a
//! camera and pressed fires `Pointer<Click>` on the batch, its hit carrying
//! the instance under the pixel (the nearest along the ray); over the sky,
//! nothing.

use crate::harness::{CameraSetup, harness_with_plugins, looking_down_grid};
use bevy::camera::{NormalizedRenderTarget, RenderTarget};
use bevy::picking::backend::HitData;
use bevy::picking::pointer::{Location, PointerAction, PointerButton, PointerId, PointerInput};
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use bevy_gpu_cull::{GpuCullHit, GpuCullPickingPlugin};
use std::sync::{Arc, Mutex};

/// The clicks seen: the entity and the instance its hit carries.
type Clicks = Arc<Mutex<Vec<(Entity, Option<u32>)>>>;

/// The instance a ray through `pixel` hits first on the CPU: the harness's
/// spheres (radius 0.5, their meshes icospheres within 1% of it).
fn nearest_sphere(app: &mut App, camera: Entity, batch: Entity, pixel: Vec2) -> Option<u32> {
    let world = app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let ray = cam.viewport_to_world(transform, pixel).unwrap();
    let instances = world.get::<GpuCullInstances>(batch).unwrap().instances();
    instances
        .iter()
        .enumerate()
        .filter_map(|(i, inst)| {
            let to = ray.origin - inst.position;
            let b = to.dot(*ray.direction);
            let disc = b * b - (to.length_squared() - 0.25);
            (disc >= 0.0).then(|| (i as u32, -b - disc.sqrt()))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// Moves the mouse to `pixel` of `target`, runs frames, presses and
/// releases the primary button, runs frames.
fn click(app: &mut App, target: &NormalizedRenderTarget, pixel: Vec2) {
    let location = Location {
        target: target.clone(),
        position: pixel,
    };
    let send = |app: &mut App, action: PointerAction| {
        app.world_mut()
            .write_message(PointerInput::new(PointerId::Mouse, location.clone(), action));
    };
    send(app, PointerAction::Move { delta: Vec2::ZERO });
    for _ in 0..3 {
        app.update();
    }
    send(app, PointerAction::Press(PointerButton::Primary));
    app.update();
    send(app, PointerAction::Release(PointerButton::Primary));
    for _ in 0..3 {
        app.update();
    }
}

#[test]
fn a_click_on_an_instance_fires_on_the_batch_with_the_instance() {
    let mut h = harness_with_plugins(None, &[looking_down_grid()], CameraSetup::Plain, |app| {
        app.add_plugins(GpuCullPickingPlugin);
    });
    // Bevy's picking tests a pointer's location against the cameras only
    // where there is a primary window (here one that no window backend
    // opens; the camera draws into an image).
    h.app
        .world_mut()
        .spawn((Window::default(), bevy::window::PrimaryWindow));
    let clicks: Clicks = Arc::default();
    let sink = clicks.clone();
    h.app.add_observer(move |event: On<Pointer<Click>>| {
        let hit: &HitData = &event.hit;
        let instance = hit.extra_as::<GpuCullHit>().map(|h| h.instance);
        sink.lock().unwrap().push((event.entity, instance));
    });
    // Frames until the bounds exist and the camera knows its target's size.
    for _ in 0..10 {
        h.app.update();
    }
    let camera = h.cameras[0];
    let target = h
        .app
        .world()
        .get::<RenderTarget>(camera)
        .unwrap()
        .normalize(None)
        .unwrap();
    // The pixel of an instance in the middle of the grid, seen over its
    // neighbours: the nearest sphere along its ray.
    let world = h.app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let pixel = cam
        .world_to_viewport(transform, Vec3::new(0.0, 0.3, -10.0))
        .unwrap();
    let expected = nearest_sphere(&mut h.app, camera, h.batch, pixel).expect("a sphere under the pixel");
    click(&mut h.app, &target, pixel);
    let seen = clicks.lock().unwrap().clone();
    assert_eq!(seen, vec![(h.batch, Some(expected))], "clicks at {pixel}");
    // The sky: no click on the batch.
    clicks.lock().unwrap().clear();
    click(&mut h.app, &target, Vec2::new(48.0, 1.0));
    let seen = clicks.lock().unwrap().clone();
    assert!(seen.is_empty(), "a click on the sky hit {seen:?}");
}

/// With Bevy's own mesh picking beside the batches' backend, the batch
/// entity's `Mesh3d` (which stands at the entity's transform but is not
/// drawn there) is never hit: a click where it would be, in the sky, hits
/// nothing, and a click on an instance carries the instance.
#[test]
fn bevy_mesh_picking_never_hits_the_batch_entity_own_mesh() {
    let mut h = harness_with_plugins(None, &[looking_down_grid()], CameraSetup::Plain, |app| {
        app.add_plugins((
            GpuCullPickingPlugin,
            bevy::picking::mesh_picking::MeshPickingPlugin,
        ));
    });
    h.app
        .world_mut()
        .spawn((Window::default(), bevy::window::PrimaryWindow));
    // The entity's own mesh, 8 times larger, high in the sky; the instances
    // given relative to it stay where they were.
    let sky = Transform::from_xyz(0.0, 6.0, -30.0).with_scale(Vec3::splat(8.0));
    let world = h.app.world_mut();
    let local: Vec<GpuCullInstance> = world
        .get::<GpuCullInstances>(h.batch)
        .unwrap()
        .instances()
        .iter()
        .map(|i| GpuCullInstance {
            position: (i.position - sky.translation) / sky.scale.x,
            scale: i.scale / sky.scale.x,
            ..*i
        })
        .collect();
    // Bevy computes no `Aabb` for an entity without frustum culling, so
    // its mesh backend skips a batch as it is; an application may add one
    // (for its own queries), which must not make the entity's mesh
    // pickable.
    let aabb = bevy::camera::primitives::Aabb::from_min_max(Vec3::splat(-0.5), Vec3::splat(0.5));
    world.entity_mut(h.batch).insert((sky, aabb));
    world.get_mut::<GpuCullInstances>(h.batch).unwrap().replace(local);
    let clicks: Clicks = Arc::default();
    let sink = clicks.clone();
    h.app.add_observer(move |event: On<Pointer<Click>>| {
        let instance = event.hit.extra_as::<GpuCullHit>().map(|h| h.instance);
        sink.lock().unwrap().push((event.entity, instance));
    });
    for _ in 0..10 {
        h.app.update();
    }
    let camera = h.cameras[0];
    let target = h
        .app
        .world()
        .get::<RenderTarget>(camera)
        .unwrap()
        .normalize(None)
        .unwrap();
    let world = h.app.world_mut();
    let (cam, transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let own_mesh = cam.world_to_viewport(transform, sky.translation).unwrap();
    let instance = cam
        .world_to_viewport(transform, Vec3::new(0.0, 0.3, -10.0))
        .unwrap();
    click(&mut h.app, &target, own_mesh);
    let seen = clicks.lock().unwrap().clone();
    assert!(seen.is_empty(), "a click on the entity's own mesh hit {seen:?}");
    click(&mut h.app, &target, instance);
    let seen = clicks.lock().unwrap().clone();
    assert!(
        matches!(seen.as_slice(), [(batch, Some(_))] if *batch == h.batch),
        "a click on an instance: {seen:?}"
    );
}
