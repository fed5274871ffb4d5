// SPDX-License-Identifier: GPL-2.0
//! `mrcize`: run a program with its TCP sockets turned into MRC sockets.
//!
//! `mrcize run [--fallback] [--] CMD [ARGS...]` puts `libmrcize.so` in
//! LD_PRELOAD (in front of what is there) and executes CMD.
//! `mrcize lib` prints the library's path, for LD_PRELOAD in service
//! units. The library is `$MRCIZE_LIB` if set, else looked for beside this
//! program (the build tree: tools/target/release/), in ../lib/mrcize/ and
//! ../lib/ from it, and in deps/ beside it (where cargo leaves it when it
//! builds it for tests only).

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const LIB: &str = "libmrcize.so";

const USAGE: &str = "\
usage: mrcize run [--fallback] [--] CMD [ARGS...]
       mrcize lib

run       run CMD with its TCP sockets turned into MRC (AF_MRC SOCK_STREAM)
          sockets: LD_PRELOAD=<lib> [MRCIZE_FALLBACK=1] CMD ARGS...
--fallback  a connection refused or unanswered over MRC is made over TCP instead
lib       print the path of the preload library

The library is $MRCIZE_LIB if set, else found beside this program.";

/// Where the library may be, relative to this program.
fn candidates(exe_dir: &Path) -> [PathBuf; 4] {
    [
        exe_dir.join(LIB),
        exe_dir.join("../lib/mrcize").join(LIB),
        exe_dir.join("../lib").join(LIB),
        exe_dir.join("deps").join(LIB),
    ]
}

fn find_lib() -> Result<PathBuf, String> {
    if let Some(l) = std::env::var_os("MRCIZE_LIB").filter(|l| !l.is_empty()) {
        let p = PathBuf::from(l);
        return p
            .canonicalize()
            .map_err(|e| format!("MRCIZE_LIB={}: {e}", p.display()));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    candidates(dir)
        .into_iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
        .ok_or_else(|| format!("{LIB} not found beside {}", exe.display()))
}

/// The new LD_PRELOAD: the library first, then what was there.
fn preload_value(lib: &Path, old: Option<&OsStr>) -> OsString {
    let mut v = OsString::from(lib.as_os_str());
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        v.push(" ");
        v.push(old);
    }
    v
}

fn run(args: &[OsString]) -> ExitCode {
    let mut fallback = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.to_str() {
            Some("--fallback") => fallback = true,
            Some("--") => {
                i += 1;
                break;
            }
            Some(s) if s.starts_with('-') => {
                eprintln!("mrcize: unknown option {s}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ => break,
        }
        i += 1;
    }
    let Some((cmd, rest)) = args[i.min(args.len())..].split_first() else {
        eprintln!("mrcize: run: no command\n{USAGE}");
        return ExitCode::from(2);
    };
    let lib = match find_lib() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mrcize: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut c = Command::new(cmd);
    c.args(rest).env(
        "LD_PRELOAD",
        preload_value(&lib, std::env::var_os("LD_PRELOAD").as_deref()),
    );
    if fallback {
        c.env("MRCIZE_FALLBACK", "1");
    }
    let e = c.exec();
    eprintln!("mrcize: {}: {e}", Path::new(cmd).display());
    ExitCode::from(127)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        Some("run") => run(&args[1..]),
        Some("lib") => match find_lib() {
            Ok(l) => {
                println!("{}", l.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("mrcize: {e}");
                ExitCode::FAILURE
            }
        },
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_keeps_existing_libraries() {
        let lib = Path::new("/x/libmrcize.so");
        assert_eq!(preload_value(lib, None), "/x/libmrcize.so");
        assert_eq!(preload_value(lib, Some(OsStr::new(""))), "/x/libmrcize.so");
        assert_eq!(
            preload_value(lib, Some(OsStr::new("/y/a.so"))),
            "/x/libmrcize.so /y/a.so"
        );
    }

    #[test]
    fn library_places() {
        let c = candidates(Path::new("/opt/bin"));
        assert_eq!(c[0], Path::new("/opt/bin/libmrcize.so"));
        assert_eq!(c[1], Path::new("/opt/bin/../lib/mrcize/libmrcize.so"));
        assert_eq!(c[3], Path::new("/opt/bin/deps/libmrcize.so"));
    }
}
