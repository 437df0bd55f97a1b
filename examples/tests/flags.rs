//! Every example's flags: `--help` lists them and exits successfully; an
//! unknown flag, or a value that does not parse, is named in the error and
//! the example exits unsuccessfully, before opening anything.

mod common;

use std::process::{Command, Output};

const EXAMPLES: [&str; 11] = [
    "minimal",
    "lod",
    "occlusion",
    "cells",
    "spheres",
    "explorer",
    "forest",
    "custom_material",
    "boids",
    "grass",
    "pick",
];

fn run(name: &str, args: &[&str]) -> (Output, String) {
    let out = Command::new(common::example(name)).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn help_lists_each_example_flags() {
    for name in EXAMPLES {
        let (out, text) = run(name, &["--help"]);
        assert!(out.status.success(), "{name} --help: {:?}\n{text}", out.status);
        for flag in [
            "--count",
            "--headless",
            "--frames",
            "--screenshot",
            "--size",
            "--json",
        ] {
            assert!(text.contains(flag), "{name} --help lists no {flag}:\n{text}");
        }
    }
}

#[test]
fn a_bad_flag_or_value_is_named() {
    for name in EXAMPLES {
        for (args, named) in [
            (&["--no-such-flag"][..], "--no-such-flag"),
            (&["--count", "many"][..], "many"),
            (&["--size", "wide"][..], "wide"),
        ] {
            let (out, text) = run(name, args);
            assert!(!out.status.success(), "{name} {args:?} succeeded:\n{text}");
            assert!(
                text.contains(named),
                "{name} {args:?}: the error does not name `{named}`:\n{text}"
            );
        }
    }
}

#[test]
fn a_pixel_size_out_of_range_is_named() {
    let (out, text) = run("forest", &["--min-pixels", "-1"]);
    assert!(!out.status.success(), "forest --min-pixels -1 succeeded:\n{text}");
    assert!(text.contains("`-1`"), "the error does not name `-1`:\n{text}");
    // At 270 pixels the coarser levels end at 5.4: a larger size would
    // leave the levels out of order.
    let (out, text) = run("forest", &["--headless", "--lod", "--min-pixels", "6"]);
    assert!(!out.status.success(), "forest --min-pixels 6 succeeded:\n{text}");
    assert!(
        text.contains("--min-pixels 6"),
        "the error does not name the flag:\n{text}"
    );
}
