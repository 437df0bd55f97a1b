//! On Linux without an X11 server, an example opens a native Wayland
//! window and draws into it: weston (Wayland's reference compositor,
//! headless, on a socket of its own, with its desktop shell) runs the
//! `minimal` example's window, and weston's own screenshot of its output
//! must show the lit, colored cubes. Without Wayland support the example cannot open a
//! window (there is no `DISPLAY`) and exits: the test fails.

#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The compositor's output: small, since lavapipe renders every pixel on
/// the CPU.
const OUTPUT: (u32, u32) = (480, 270);

/// Lavapipe compiles the example's pipelines in a debug build before its
/// first frame: tens of seconds on 2 cores.
const PATIENCE: Duration = Duration::from_secs(240);

/// Kills and reaps a child when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_weston(runtime: &Path, socket: &str, log: &Path) -> Reaped {
    let (w, h) = OUTPUT;
    let weston = Command::new("weston")
        // No weston.ini of the machine's: the default desktop, gray.
        .args(["--no-config", "--backend=headless-backend.so", "--use-pixman"])
        .args([
            "--idle-time=0",
            "--debug",
            &format!("--width={w}"),
            &format!("--height={h}"),
        ])
        .arg(format!("--socket={socket}"))
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DISPLAY")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("weston: {e} (scripts/install-deps.sh installs it)"));
    let mut weston = Reaped(weston);
    let started = Instant::now();
    while !runtime.join(socket).exists() {
        let exited = weston.0.try_wait().unwrap();
        if exited.is_some() || started.elapsed() > Duration::from_secs(20) {
            let why = std::fs::read_to_string(log).unwrap_or_default();
            panic!("weston opened no socket (exit: {exited:?}):\n{why}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    weston
}

/// Weston's screenshot of its output, saved by `weston-screenshooter` into
/// `dir` (it names the file by the time).
fn screenshot(runtime: &Path, socket: &str, dir: &Path) -> Option<image::RgbaImage> {
    let shots = |dir: &Path| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(dir).unwrap().flatten();
        entries
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "png"))
            .collect()
    };
    for old in shots(dir) {
        std::fs::remove_file(old).unwrap();
    }
    let status = Command::new("weston-screenshooter")
        .current_dir(dir)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("WAYLAND_DISPLAY", socket)
        .status()
        .unwrap_or_else(|e| panic!("weston-screenshooter: {e} (scripts/install-deps.sh installs it)"));
    assert!(status.success(), "weston-screenshooter: {status}");
    let shot = shots(dir).pop()?;
    Some(image::open(shot).unwrap().to_rgba8())
}

/// Pixels of a strong hue: the cubes are colored, weston's desktop gray.
fn colored_pixels(img: &image::RgbaImage) -> usize {
    let saturated = |p: &image::Rgba<u8>| {
        let [r, g, b, _] = p.0;
        r.max(g).max(b) - r.min(g).min(b) > 60
    };
    img.pixels().filter(|p| saturated(p)).count()
}

/// The folder of this test's files, removed when the test ends.
struct TestDir(PathBuf);

impl TestDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("gpu-cull-wayland-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("runtime")).unwrap();
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o700);
        std::fs::set_permissions(dir.join("runtime"), private).unwrap();
        Self(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Weston's desktop once its shell has painted it (the output is black
/// before): the picture the example's window must change.
fn painted_desktop(runtime: &Path, socket: &str, dir: &Path) -> image::RgbaImage {
    let started = Instant::now();
    loop {
        let shot = screenshot(runtime, socket, dir);
        let lit = |img: &image::RgbaImage| img.pixels().filter(|p| p.0[..3] != [0, 0, 0]).count();
        if let Some(img) = shot.filter(|img| lit(img) * 2 > (img.width() * img.height()) as usize) {
            return img;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "weston's desktop was not painted"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn an_example_opens_a_wayland_window_without_x11() {
    // Dropped last: weston and the example are gone before their files.
    let dir = TestDir::new();
    let (dir, runtime) = (&dir.0, dir.0.join("runtime"));
    let socket = "gpu-cull-test";
    let _weston = start_weston(&runtime, socket, &dir.join("weston.log"));
    let (w, h) = OUTPUT;
    let desktop = painted_desktop(&runtime, socket, dir);
    assert_eq!((desktop.width(), desktop.height()), (w, h));
    let few = (w * h / 100) as usize;
    assert!(
        colored_pixels(&desktop) < few,
        "weston's empty desktop is colored"
    );
    let log = dir.join("minimal.log");
    let mut example = Reaped(
        Command::new(common::example("minimal"))
            .args(["--count", "2000"])
            .env_remove("DISPLAY")
            .env("WAYLAND_DISPLAY", socket)
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let mut colored = 0;
    while started.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_secs(2));
        if let Some(status) = example.0.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the example exited ({status}) instead of drawing in a Wayland window:\n{stderr}");
        }
        // The window (1280x720) covers the output below weston's panel:
        // cubes over at least a twentieth of it.
        colored = screenshot(&runtime, socket, dir).map_or(0, |img| colored_pixels(&img));
        if colored > (w * h / 20) as usize {
            return;
        }
    }
    panic!("no cubes on weston's output after {PATIENCE:?} ({colored} colored pixels)");
}
