//! Backends and render setups: wgpu's GL backend (in a child process), an
//! HDR camera with MSAA, `RenderStartup` run again, and a scene captured for
//! `replay`.

use crate::harness::*;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Issue 16: `GpuCullCaptureScene` writes the scene file of a (camera, batch) as
/// the plugin culls it; the CPU reference over that file brackets the
/// GPU's count (`replay` runs the same file through every variant).
#[test]
fn capture_writes_a_scene_file_replay_reads() {
    let mut h = harness(None, &[looking_down_grid()]);
    let counts = run_until_counts_match(&mut h, "before the capture");
    let path = std::env::temp_dir().join(format!("bevy-gpu-cull-capture-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    h.app.world_mut().write_message(GpuCullCaptureScene {
        camera: h.cameras[0],
        batch: h.batch,
        path: path.clone(),
    });
    h.app.update();
    let text = std::fs::read_to_string(&path).expect("the capture wrote the file");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let floats = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    let m = Mat4::from_cols_slice(&floats(&json["clip_from_world"]));
    let center = floats(&json["bounds"]["center"]);
    let radius = json["bounds"]["radius"].as_f64().unwrap() as f32;
    let instances: Vec<cull_core::Instance> = json["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| cull_core::Instance {
            position: Vec3::from_slice(&floats(&i["position"])),
            rotation: Quat::from_slice(&floats(&i["rotation"])),
            scale: i["scale"].as_f64().unwrap() as f32,
        })
        .collect();
    assert_eq!(instances.len(), 1600);
    let format = cull_core::InstanceFormat::PosQuat;
    let reference = cull_core::cpu::classify(
        format,
        &format.encode(&instances).unwrap(),
        cull_core::Sphere::new(Vec3::from_slice(&center), radius),
        &cull_core::Frustum::from_clip_from_world(m, None).unwrap(),
    )
    .unwrap();
    let (sure, maybe) = (reference.visible.len() as u32, reference.borderline.len() as u32);
    assert!(
        sure <= counts[0] && counts[0] <= sure + maybe,
        "GPU {} vs the file's reference {sure} (+{maybe} borderline)",
        counts[0]
    );
}

/// An HDR camera with 4x MSAA: the pipeline is specialized for the view's
/// sample count and HDR target, and the instances show after tonemapping.
#[test]
fn hdr_msaa_camera_renders() {
    let camera = looking_down_grid();
    let mut h = harness_with(None, &[camera], CameraSetup::HdrMsaa4);
    // An unlit green Bevy mesh in front of the left half of the view: the
    // instances behind it must be depth-tested away. The view is 2 * 3 *
    // tan(22.5 deg) * 1.5 = 3.7 wide at distance 3; the box spans from its
    // left edge to 0.1 left of the center.
    let world = h.app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(2.0, 3.0, 0.05));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgb(0.0, 1.0, 0.0),
            unlit: true,
            ..default()
        });
    let center = camera.translation + camera.forward() * 3.0 + camera.left() * 1.1;
    world.spawn((
        Mesh3d(mesh),
        MeshMaterial3d(material),
        Transform::from_translation(center).with_rotation(camera.rotation),
    ));
    run_until_counts_match(&mut h, "HDR + MSAA");
    let (w, hgt) = (WIDTH as usize, HEIGHT as usize);
    let is_green = |p: &[u8]| p[1] > 100 && p[1] as u32 > p[0] as u32 + 80;
    let pixels = assert_renders_when(&mut h, "HDR MSAA4", |pixels| {
        let p = (hgt / 2 * w + w / 8) * 4;
        is_green(&pixels[p..p + 4])
    });
    let pixel = |x: usize, y: usize| &pixels[(y * w + x) * 4..(y * w + x) * 4 + 4];
    let is_instance = |p: &[u8]| p[0] > 40 && p[0] as u32 > p[2] as u32 + 30;
    let left: Vec<&[u8]> = (0..hgt).map(|y| pixel(w / 8, y)).collect();
    assert!(
        left.iter().all(|p| is_green(p)),
        "the occluder covers the left edge: {left:?}"
    );
    let occluded_instances = (0..hgt)
        .flat_map(|y| (0..w / 2 - 4).map(move |x| (x, y)))
        .filter(|&(x, y)| is_instance(pixel(x, y)))
        .count();
    assert_eq!(occluded_instances, 0, "instances show through a nearer Bevy mesh");
    let right_instances = (hgt / 2..hgt)
        .flat_map(|y| (w / 2 + 4..w).map(move |x| (x, y)))
        .filter(|&(x, y)| is_instance(pixel(x, y)))
        .count();
    assert!(
        right_instances > 100,
        "instances show right of the occluder: {right_instances}"
    );
}

/// After a device loss Bevy re-creates the device and runs `RenderStartup`
/// again. The plugin's part of that is tested here by running `RenderStartup`
/// again on the same device: the culler and buffers are rebuilt, the batch goes
/// up whole again, and counts and pixels come back. (Destroying the device
/// itself is not testable with Bevy 0.19.1: Bevy's own uniform uploads panic
/// on a destroyed device before its error handler runs.)
#[test]
fn render_startup_rebuilds_gpu_state() {
    let mut h = harness_with(None, &[looking_down_grid()], CameraSetup::PlainSynchronous);
    run_until_counts_match(&mut h, "before");
    assert_eq!(h.app.world().resource::<GpuCullStats>().uploaded_instances, 1600);
    h.app
        .sub_app_mut(bevy::render::RenderApp)
        .world_mut()
        .run_schedule(bevy::render::RenderStartup);
    h.app.world_mut().resource_mut::<GpuCullStats>().visible.clear();
    *h.pixels.lock().unwrap() = None;
    run_until_counts_match(&mut h, "after RenderStartup ran again");
    assert_eq!(
        h.app.world().resource::<GpuCullStats>().uploaded_instances,
        3200,
        "the batch went up again, whole"
    );
    assert_renders(&mut h, "after RenderStartup");
}

/// wgpu's GL backend (llvmpipe through EGL) has no subgroups: the default
/// settings must pick a variant that runs there, and the batch still renders.
/// Bevy reads `WGPU_BACKEND` when it starts, so this runs in a child process.
#[test]
fn gl_backend_renders() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "backends::gl_backend_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WGPU_BACKEND", "gl")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child prints GL_CHILD_PASSED after its last check, then exits at
    // once; Mesa's GL driver has still crashed in its exit handlers now and
    // then (glibc's heap check in malloc_consolidate), so a crash after the
    // marker is reported, not failed on.
    assert!(
        out.status.success() || text.contains(GL_CHILD_PASSED),
        "the GL child failed (needs libegl-mesa0 and libgl1-mesa-dri):\n{text}"
    );
    if !out.status.success() {
        eprintln!(
            "the GL child passed every check, then crashed at exit ({}):\n{text}",
            out.status
        );
    }
    assert!(
        text.contains(GL_CHILD_PASSED),
        "the GL child did not finish its checks:\n{text}"
    );
}

/// Printed by the GL child when every check passed, before it exits.
const GL_CHILD_PASSED: &str = "gl child: every check passed";

#[test]
#[ignore = "run by gl_backend_renders with WGPU_BACKEND=gl"]
fn gl_backend_child() {
    assert_eq!(std::env::var("WGPU_BACKEND").as_deref(), Ok("gl"));
    let mut h = harness(None, &[looking_down_grid()]);
    // Bevy 0.19's own depth-downsampling compute shader (occlusion culling's
    // mip chain, compiled whether or not a camera uses it) fails to
    // translate on llvmpipe's GL (`textureGatherOffset` on a shadow
    // sampler), which by default quits the app a few frames in. Record
    // render errors instead, and allow that one alone.
    record_render_errors(&mut h.app);
    run_until_counts_match(&mut h, "GL backend");
    let info = h
        .app
        .world()
        .resource::<bevy::render::renderer::RenderAdapterInfo>()
        .clone();
    assert_eq!(info.backend, wgpu::Backend::Gl, "{}", info.name);
    let variant = h
        .app
        .world()
        .resource::<GpuCullStats>()
        .variant
        .expect("a variant ran");
    assert!(
        variant.required_features().is_empty(),
        "{variant:?} needs subgroups"
    );
    assert_renders(&mut h, "GL backend");
    // Issue 17: occlusion culling asked for where the device cannot build
    // depth pyramids falls back to frustum culling, says why, and still
    // draws every instance in the frustum.
    let camera = h.cameras[0];
    h.app.world_mut().entity_mut(camera).insert((
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::render::occlusion_culling::OcclusionCulling,
        GpuCullOcclusion,
    ));
    let why = h
        .app
        .world()
        .resource::<GpuCullStats>()
        .occlusion_unavailable
        .clone()
        .expect("GL reports that it cannot occlusion-cull");
    assert!(why.contains("depth pyramid"), "{why}");
    // Frames for the components to reach the render world, so that the
    // counts compared are culled with them.
    for _ in 0..20 {
        h.app.update();
    }
    run_until_counts_match(&mut h, "GL backend with GpuCullOcclusion");
    assert_renders(&mut h, "GL backend with GpuCullOcclusion");
    run_until_counts_match(&mut h, "GL backend with GpuCullOcclusion, rendered");
    let errors = render_errors(&h.app);
    assert!(
        errors.iter().all(|e| e.contains("textureGatherOffset")),
        "render errors other than Bevy's depth-downsampling shader on GL: {errors:#?}"
    );
    // Exit now: tearing down Bevy's GL app with that failed pipeline has
    // crashed inside Mesa's GL driver at exit (a heap check in
    // malloc_consolidate, now and then, after every check had passed).
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{GL_CHILD_PASSED}");
    let _ = out.flush();
    std::process::exit(0);
}
