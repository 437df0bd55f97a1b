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
        .args(["--backend=headless-backend.so", "--use-pixman"])
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
    let weston = Reaped(weston);
    let started = Instant::now();
    while !runtime.join(socket).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "weston opened no socket"
        );
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

#[test]
fn an_example_opens_a_wayland_window_without_x11() {
    let dir = tempfile_dir();
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let socket = "gpu-cull-test";
    let _weston = start_weston(&runtime, socket, &dir.join("weston.log"));
    let (w, h) = OUTPUT;
    let empty = screenshot(&runtime, socket, &dir).expect("weston saved no screenshot");
    let few = (w * h / 100) as usize;
    assert!(colored_pixels(&empty) < few, "weston's empty desktop is colored");
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
    loop {
        std::thread::sleep(Duration::from_secs(2));
        if let Some(status) = example.0.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("the example exited ({status}) instead of drawing in a Wayland window:\n{stderr}");
        }
        let Some(img) = screenshot(&runtime, socket, &dir) else {
            continue;
        };
        assert_eq!((img.width(), img.height()), (w, h));
        // The window (1280x720) covers the output below weston's panel:
        // cubes over at least a twentieth of it.
        let colored = colored_pixels(&img);
        if colored > (w * h / 20) as usize {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no cubes on weston's output after {PATIENCE:?} ({colored} colored pixels)"
        );
    }
}

/// A fresh folder of this test's own under the system's temporary folder.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpu-cull-wayland-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
