//! Shadows: batches cast shadows from directional (per cascade), point and
//! spot lights, culled per shadow view, and receive shadows from Bevy meshes.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The mean of a frame's red, green and blue, from the padded readback.
fn frame_mean(padded: &[u8]) -> f64 {
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let stride = padded.len() / hgt;
    let mut sum = 0u64;
    for y in 0..hgt {
        for p in padded[y * stride..y * stride + w * 4].chunks(4) {
            sum += p[0] as u64 + p[1] as u64 + p[2] as u64;
        }
    }
    sum as f64 / (w * hgt * 3) as f64
}

/// Renders until the lit ground covers a third of the frame (its
/// material's pipeline compiles in the background) and the frame's mean
/// brightness has held still for 15 frames; returns that mean.
fn settle_stable(h: &mut Harness) -> f64 {
    let is_ground =
        |p: &[u8]| p[0] > 100 && p[1] > 100 && p[2] > 100 && (p[0] as i32 - p[2] as i32).abs() < 40;
    let start = std::time::Instant::now();
    let mut means: Vec<f64> = Vec::new();
    while start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        let ground = count_pixels(&padded, 0..HEIGHT as usize, is_ground);
        if ground * 3 < (WIDTH * HEIGHT) as usize {
            means.clear();
            continue;
        }
        means.push(frame_mean(&padded));
        let last = &means[means.len().saturating_sub(15)..];
        if last.len() == 15
            && last.iter().cloned().fold(f64::MIN, f64::max) - last.iter().cloned().fold(f64::MAX, f64::min)
                < 0.3
        {
            return *last.last().unwrap();
        }
    }
    panic!("the lit ground never settled: {means:?}");
}

/// The frame's mean with the batch not casting (it starts with
/// `NotShadowCaster`), then with it casting: the same app, the same ground.
fn shadow_contrast(light: &str) -> (Harness, f64, f64) {
    let mut h = shadow_scene(light, false);
    let unshadowed = settle_stable(&mut h);
    h.app
        .world_mut()
        .entity_mut(h.batch)
        .remove::<bevy::light::NotShadowCaster>();
    let shadowed = settle_mean(&mut h, |mean| mean < unshadowed * 0.97);
    eprintln!("{light}: mean {shadowed:.2} casting, {unshadowed:.2} not casting");
    assert!(
        shadowed < unshadowed * 0.97,
        "{light}: the batch's shadows do not darken the ground: {shadowed:.2} with, {unshadowed:.2} without"
    );
    (h, unshadowed, shadowed)
}

/// Renders until `done` holds for the frame's mean brightness (shadow
/// pipelines compile in the background), or returns the last mean.
fn settle_mean(h: &mut Harness, done: impl Fn(f64) -> bool) -> f64 {
    let start = std::time::Instant::now();
    let mut mean = f64::NAN;
    let mut frames = 0;
    while start.elapsed() < SETTLE {
        h.app.update();
        let Some(padded) = h.pixels.lock().unwrap().clone() else {
            continue;
        };
        mean = frame_mean(&padded);
        frames += 1;
        if frames > 20 && done(mean) {
            break;
        }
    }
    mean
}

/// The batch casts shadows from a directional light, every cascade culled
/// on the GPU down to the casters whose shadow can fall on what the camera
/// sees at the cascade's depths: the frame is darker than with the batch
/// marked NotShadowCaster, each cascade's count equals the CPU reference
/// for that volume, and the cascades together keep fewer casters than
/// their boxes hold.
#[test]
fn directional_light_shadows_are_cast_and_culled_per_cascade() {
    let (mut h, _, _) = shadow_contrast("directional");
    // Each cascade of the camera: the GPU's count equals the CPU reference.
    let camera = h.cameras[0];
    let world = h.app.world_mut();
    let (light, volumes) = cascade_volumes(world, camera).expect("cascades");
    assert!(!volumes.is_empty());
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCullInstances>(h.batch).unwrap().clone();
    let stats = world.resource::<GpuCullStats>().clone();
    let (mut kept, mut in_boxes) = (0, 0);
    for (index, volume) in volumes.iter().enumerate() {
        let expected = batch.visible_on_cpu(bounds, &volume.reach, format).unwrap().len() as u32;
        let in_box = batch
            .visible_on_cpu(bounds, &volume.cascade_box, format)
            .unwrap()
            .len() as u32;
        eprintln!(
            "cascade {index}: {expected} of {} instances cast into it, of {in_box} in its box",
            batch.instances().len()
        );
        kept += expected;
        in_boxes += in_box;
        let id = GpuCullShadowView {
            light,
            camera: Some(camera),
            index: index as u32,
        };
        assert_eq!(
            stats.shadow_visible.get(&(id, h.batch)),
            Some(&expected),
            "cascade {index}: {:?}",
            stats.shadow_visible
        );
    }
    assert!(
        kept < in_boxes,
        "the cascades keep {kept} casters, their boxes hold {in_boxes}"
    );
}

/// Issue 16: the batch casts shadows from a point light: each cube face is
/// culled on the GPU (its count equal to the CPU reference for that face)
/// and drawn into the light's shadow map.
#[test]
fn point_light_shadows_are_cast() {
    let (mut h, _, _) = shadow_contrast("point");
    // Each cube face as Bevy builds it (prepare_lights: the light's
    // translation, the face's rotation, a 90° infinite reverse-Z projection):
    // the GPU's count equals the CPU reference for that face's frustum.
    let world = h.app.world_mut();
    let (light, light_transform, point) = world
        .query::<(Entity, &GlobalTransform, &PointLight)>()
        .single(world)
        .unwrap();
    let (position, near, range) = (
        light_transform.translation(),
        point.shadow_map_near_z,
        point.range,
    );
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    let batch = world.get::<GpuCullInstances>(h.batch).unwrap().clone();
    let stats = world.resource::<GpuCullStats>().clone();
    let projection = Mat4::perspective_infinite_reverse_rh(std::f32::consts::FRAC_PI_2, 1.0, near);
    let mut faces = Vec::new();
    for (index, face) in bevy::camera::primitives::CUBE_MAP_FACES.iter().enumerate() {
        let world_from_view = GlobalTransform::from_translation(position)
            * Transform::IDENTITY.looking_at(face.target, face.up);
        let frustum =
            cull_core::Frustum::from_view(projection, world_from_view.to_matrix(), Some(range)).unwrap();
        let expected = batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
        let id = GpuCullShadowView {
            light,
            camera: None,
            index: index as u32,
        };
        assert_eq!(
            stats.shadow_visible.get(&(id, h.batch)),
            Some(&expected),
            "face {index}: {:?}",
            stats.shadow_visible
        );
        faces.push(expected);
    }
    // The light hangs above the raised batch: every instance is in some
    // face, and the face looking up keeps none.
    assert!(
        faces.iter().sum::<u32>() >= 144 && faces.contains(&0),
        "{faces:?}"
    );
}

/// The batch casts shadows from a spot light, its one view culled on the
/// GPU by the cone the light lights: its count is the CPU reference's for
/// the view's frustum and cone (the cone's angle the outer angle, widened by
/// eight texels of the shadow map on each side), fewer than the frustum
/// alone keeps (four instances are added in the square map's corners,
/// outside the cone, and two others removed), and the batch darkens the
/// ground.
#[test]
fn spot_light_shadows_are_cast_and_culled_by_the_cone() {
    let (mut h, _, _) = shadow_contrast("spot");
    let world = h.app.world_mut();
    let (light, light_transform, spot) = world
        .query::<(Entity, &GlobalTransform, &SpotLight)>()
        .single(world)
        .unwrap();
    let (light_transform, spot) = (*light_transform, *spot);
    let (position, forward) = (light_transform.translation(), light_transform.forward());
    let map_size = world.resource::<bevy::light::DirectionalLightShadowMap>().size as f32;
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(h.batch).unwrap();
    // The view as Bevy builds it (spot_light_world_from_view and
    // spot_light_clip_from_view), bounded by the range.
    let world_from_view = Mat4::from(bevy::light::spot_light_world_from_view(&light_transform));
    let projection = bevy::light::spot_light_clip_from_view(spot.outer_angle, spot.shadow_map_near_z);
    let frustum = cull_core::Frustum::from_view(projection, world_from_view, Some(spot.range)).unwrap();
    // Small instances 3 units out toward the map's four corners: in the
    // frustum, outside the cone.
    let tan = spot.outer_angle.tan() * 0.97;
    // Two fewer of the others, so that no count of the old batch matches.
    let mut batch = world.get_mut::<GpuCullInstances>(h.batch).unwrap();
    let kept = batch.instances().len() - 2;
    batch.instances_mut().truncate(kept);
    for (x, y) in [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)] {
        let p = world_from_view.transform_point3(Vec3::new(x * tan, y * tan, -1.0) * 3.0);
        batch.push(GpuCullInstance::new(p, Srgba::rgb(1.0, 0.2, 0.1)).with_scale(0.2));
    }
    let batch = batch.clone();
    let widened = (spot.outer_angle.tan() * (1.0 + 16.0 / map_size)).atan();
    let cone = cull_core::SpotCone::new(position, forward.as_vec3(), widened, spot.range).unwrap();
    let in_frustum = batch.visible_on_cpu(bounds, &frustum, format).unwrap().len() as u32;
    let in_cone = batch
        .visible_on_cpu(bounds, &frustum.with_cone(cone), format)
        .unwrap()
        .len() as u32;
    assert!(
        0 < in_cone && in_cone + 4 <= in_frustum,
        "cone {in_cone}, frustum {in_frustum}"
    );
    let id = GpuCullShadowView {
        light,
        camera: None,
        index: 0,
    };
    let mut count = None;
    for _ in 0..200 {
        h.app.update();
        count = h
            .app
            .world()
            .resource::<GpuCullStats>()
            .shadow_visible
            .get(&(id, h.batch))
            .copied();
        if count == Some(in_cone) {
            break;
        }
    }
    assert_eq!(
        count,
        Some(in_cone),
        "the spot view's count (the frustum keeps {in_frustum})"
    );
}

/// Issue 16: instances receive shadows like Bevy meshes: in the shadow of an
/// ordinary mesh between them and the light they are darker than with the
/// occluder gone (the draw's PBR input sets the shadow-receiver flag).
#[test]
fn instances_receive_shadows_from_bevy_meshes() {
    let mut h = shadow_scene("directional", false);
    settle_stable(&mut h);
    let lit = instance_red(&h.pixels.lock().unwrap().clone().unwrap());
    // A wide slab over the batch, above the camera's view, between the
    // batch and the light.
    let world = h.app.world_mut();
    let slab = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(60.0, 0.5, 60.0));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::WHITE));
    world.spawn((
        Mesh3d(slab),
        MeshMaterial3d(material),
        Transform::from_xyz(0.0, 14.0, -15.0),
    ));
    let start = std::time::Instant::now();
    let mut shaded = lit;
    while start.elapsed() < SETTLE {
        h.app.update();
        if let Some(padded) = h.pixels.lock().unwrap().clone() {
            shaded = instance_red(&padded);
            if shaded < lit * 0.8 {
                break;
            }
        }
    }
    eprintln!("instances: red {shaded:.1} in the slab's shadow, {lit:.1} in the light");
    assert!(
        shaded < lit * 0.8,
        "instances in a mesh's shadow stay lit: red {shaded:.1} shaded, {lit:.1} lit"
    );
}
