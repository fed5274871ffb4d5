// SPDX-License-Identifier: GPL-2.0
//! The preload library on a host without the MRC module: TCP programs run
//! under `mrcize run` keep working over TCP and say so once per process.
//! (MRC itself is tested in the VM by selftests/mrc_apps.sh.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MRCIZE: &str = env!("CARGO_BIN_EXE_mrcize");
const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/apps.py");
const UNAVAILABLE: &str = "mrcize: no MRC stream sockets (AF_MRC ";

/// The library cargo built for these tests (in deps/ beside the
/// launcher; a library beside the launcher itself may be an older build).
fn lib() -> PathBuf {
    let l = Path::new(MRCIZE)
        .with_file_name("deps")
        .join("libmrcize.so");
    assert!(l.is_file(), "{} was not built", l.display());
    l
}

/// The launcher, told to use this build's library.
fn mrcize() -> Command {
    let mut c = Command::new(MRCIZE);
    c.env("MRCIZE_LIB", lib());
    c
}

fn module_loaded() -> bool {
    Path::new("/sys/module/mrc").exists()
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// mrcize's lines on stderr.
fn log_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("mrcize:"))
        .map(str::to_string)
        .collect()
}

fn check_apps_run(o: &Output) {
    assert!(o.status.success(), "{}", show(o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "OK",
        "{}",
        show(o)
    );
    if module_loaded() {
        return;
    }
    // One line from each process image that opened a TCP socket: the
    // program and its exec'd child (the forked child inherits "said it").
    let lines = log_lines(o);
    assert_eq!(lines.len(), 2, "{}", show(o));
    for l in &lines {
        assert!(l.starts_with(UNAVAILABLE), "{l}");
        assert!(l.ends_with("): using TCP"), "{l}");
    }
}

#[test]
fn run_without_module_uses_tcp() {
    let o = mrcize()
        .args(["run", "--fallback", "python3", APPS])
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run mrcize");
    check_apps_run(&o);
}

/// The environment form used in service units.
#[test]
fn ld_preload_form() {
    let o = Command::new("python3")
        .arg(APPS)
        .env("LD_PRELOAD", lib())
        .env("MRCIZE_FALLBACK", "1")
        .output()
        .expect("run python3");
    check_apps_run(&o);
}

/// Without the library the same program prints no mrcize line: the lines
/// above come from the preload.
#[test]
fn without_preload_no_lines() {
    let o = Command::new("python3")
        .arg(APPS)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run python3");
    assert!(o.status.success(), "{}", show(&o));
    assert!(log_lines(&o).is_empty(), "{}", show(&o));
}

#[test]
fn launcher_environment() {
    let o = mrcize()
        .args(["run", "--fallback", "--", "env"])
        .env("LD_PRELOAD", "/nonexistent/other.so")
        .env_remove("MRCIZE_FALLBACK")
        .output()
        .expect("run mrcize");
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let want = format!(
        "LD_PRELOAD={} /nonexistent/other.so",
        lib().canonicalize().expect("lib").display()
    );
    assert!(out.lines().any(|l| l == want), "no `{want}` in\n{out}");
    assert!(out.lines().any(|l| l == "MRCIZE_FALLBACK=1"), "{out}");

    let o = mrcize()
        .args(["run", "env"])
        .env_remove("MRCIZE_FALLBACK")
        .output()
        .expect("run mrcize");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("MRCIZE_FALLBACK"), "{out}");

    let o = mrcize().arg("lib").output().expect("mrcize lib");
    assert!(o.status.success(), "{}", show(&o));
    let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert_eq!(Path::new(&path), lib().canonicalize().expect("lib"));

    // Without MRCIZE_LIB the launcher finds a library near itself.
    let o = Command::new(MRCIZE)
        .arg("lib")
        .env_remove("MRCIZE_LIB")
        .output()
        .expect("mrcize lib");
    assert!(o.status.success(), "{}", show(&o));
    let path = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(
        path.is_file() && path.ends_with("libmrcize.so"),
        "{}",
        show(&o)
    );
    let o = Command::new(MRCIZE)
        .arg("lib")
        .env("MRCIZE_LIB", "/nonexistent/libmrcize.so")
        .output()
        .expect("mrcize lib");
    assert!(!o.status.success(), "{}", show(&o));
}

#[test]
fn launcher_usage_errors() {
    for args in [&["run"][..], &["run", "--bogus", "true"], &["nonsense"]] {
        let o = mrcize().args(args).output().expect("run mrcize");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", show(&o));
    }
    let o = mrcize()
        .args(["run", "/nonexistent/program"])
        .output()
        .expect("run mrcize");
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
}
