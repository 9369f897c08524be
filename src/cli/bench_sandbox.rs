//! `abhed bench --sandbox`: the microVM's boot to a first command and its per-command round trip
//! (`true`, `echo hi`), side by side with host `bash -c true` in the same run; and what the exec
//! check costs: `true` and a `make` of 1,000 execs with and without the supervisor.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use abhed::config::Config;
use abhed::sandbox::image::Image;
use abhed::sandbox::vm::{Accel, BootSpec, MicroVm};
use abhed::sandbox::{find_qemu, try_kvm};

use super::{Failure, exit, print_stdout};

/// Writes a Makefile of 1,000 rules that each run `true` (in the guest's /tmp).
const MAKEFILE: &str = "mkdir -p /tmp/abhed-bench && cd /tmp/abhed-bench && { printf 'all:'; for i in $(seq 1000); do printf ' t%d' $i; done; printf '\\n'; for i in $(seq 1000); do printf 't%d:\\n\\t@true\\n' $i; done; } > Makefile";
const MAKE: &str = "make -s -j1 -C /tmp/abhed-bench";
const MAKE_REPS: u32 = 5;

struct Stats {
    median_ms: f64,
    mean_ms: f64,
    min_ms: f64,
    max_ms: f64,
}

fn stats(mut d: Vec<Duration>) -> Stats {
    d.sort();
    let ms: Vec<f64> = d.iter().map(|x| x.as_secs_f64() * 1000.0).collect();
    let n = ms.len().max(1);
    Stats {
        median_ms: ms.get(n / 2).copied().unwrap_or(0.0),
        mean_ms: ms.iter().sum::<f64>() / n as f64,
        min_ms: ms.first().copied().unwrap_or(0.0),
        max_ms: ms.last().copied().unwrap_or(0.0),
    }
}

pub fn run(boots: u32, calls: u32, json_out: bool) -> Result<u8, Failure> {
    let ws = std::env::current_dir().map_err(|e| Failure::usage(format!("no current directory: {e}")))?;
    let config = Config::load(&ws).map_err(|e| Failure::usage(format!("{e:#}")))?;
    // The current directory is shared with the VM like a workspace.
    abhed::boundary::check_workspace(&ws, &config).map_err(|e| Failure::usage(e.to_string()))?;
    let sb = &config.sandbox;
    let qemu = find_qemu(sb.qemu.as_deref()).map_err(|e| Failure::usage(e.to_string()))?;
    let image = Image::locate(sb.image_dir.as_deref(), &abhed::layout::search_dirs("vm")).map_err(Failure::usage)?;
    let mut spec = BootSpec::from_config(sb, qemu, vec![ws.clone()]);
    let mut accels = vec![Accel::Tcg];
    let kvm_note = match try_kvm(&image, &spec) {
        Ok(_) => {
            accels.insert(0, Accel::Kvm);
            "KVM works here".to_string()
        }
        Err(e) => format!("KVM not usable here ({e}); TCG only"),
    };
    let err = |e: abhed::sandbox::vm::VmError| Failure { code: exit::INTERNAL, message: e.to_string() };

    let host: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            let _ = Command::new("bash").args(["-c", "true"]).status();
            t.elapsed()
        })
        .collect();
    let host = stats(host);

    let mut rows = Vec::new();
    let mut text = format!(
        "{kvm_note}\n\nhost `bash -c true`: median {:.1} ms (mean {:.1}, min {:.1}, max {:.1}; {calls} runs)\n",
        host.median_ms, host.mean_ms, host.min_ms, host.max_ms
    );
    for accel in accels {
        spec.accel = accel;
        let mut boot = Vec::new();
        let mut vm = None;
        for _ in 0..boots {
            let t = Instant::now();
            let mut v = MicroVm::boot(&image, &spec).map_err(err)?;
            v.exec(0, "true", &ws, &ws, 10_000, &Default::default()).map_err(err)?;
            boot.push(t.elapsed());
            vm = Some(v);
        }
        let Some(mut vm) = vm else { continue };
        let mut id = 1;
        let checked = abhed_guest::policy::ExecPolicy::default();
        let unchecked = abhed_guest::policy::ExecPolicy { unchecked: true, ..Default::default() };
        let mut round = |cmd: &str, policy: &abhed_guest::policy::ExecPolicy, n: u32| -> Result<Stats, Failure> {
            let mut d = Vec::new();
            for _ in 0..n {
                id += 1;
                let t = Instant::now();
                let r = vm.exec(id, cmd, &ws, &ws, 600_000, policy).map_err(err)?;
                if r.exit_code != Some(0) {
                    return Err(Failure {
                        code: exit::INTERNAL,
                        message: format!("`{cmd}` failed in the VM: {}{}", r.output.head, r.output.tail),
                    });
                }
                d.push(t.elapsed());
            }
            Ok(stats(d))
        };
        let t = round("true", &checked, calls)?;
        let e = round("echo hi", &checked, calls)?;
        let tu = round("true", &unchecked, calls)?;
        // A build of 1,000 execs: make runs each `@true` recipe itself (no shell), so the
        // supervisor stops 1,001 execs per build; alternated with the same build unchecked.
        round(MAKEFILE, &checked, 1)?;
        let (mut mc, mut mu) = (Vec::new(), Vec::new());
        for _ in 0..MAKE_REPS {
            mc.push(round(MAKE, &checked, 1)?.median_ms);
            mu.push(round(MAKE, &unchecked, 1)?.median_ms);
        }
        let ms = |v: &[f64]| stats(v.iter().map(|m| Duration::from_secs_f64(m / 1000.0)).collect());
        let (mc, mu) = (ms(&mc), ms(&mu));
        let b = stats(boot);
        text.push_str(&format!(
            "\n{} ({boots} boots, {calls} calls each)\n  boot to first command: median {:.0} ms (min {:.0}, max {:.0})\n  `true` round trip:     median {:.1} ms (mean {:.1}) = host + {:.1} ms\n  `echo hi` round trip:  median {:.1} ms (mean {:.1}) = host + {:.1} ms\n  `true`, exec check off: median {:.1} ms (mean {:.1})\n  make of 1,000 execs:   median {:.0} ms checked, {:.0} ms unchecked ({MAKE_REPS} each): {:+.1}%\n",
            accel.as_str(),
            b.median_ms,
            b.min_ms,
            b.max_ms,
            t.median_ms,
            t.mean_ms,
            t.median_ms - host.median_ms,
            e.median_ms,
            e.mean_ms,
            e.median_ms - host.median_ms,
            tu.median_ms,
            tu.mean_ms,
            mc.median_ms,
            mu.median_ms,
            (mc.median_ms / mu.median_ms - 1.0) * 100.0,
        ));
        rows.push(json!({
            "accel": accel.as_str(),
            "boot_ms_median": b.median_ms, "boot_ms_min": b.min_ms, "boot_ms_max": b.max_ms,
            "true_ms_median": t.median_ms, "true_ms_mean": t.mean_ms,
            "echo_ms_median": e.median_ms, "echo_ms_mean": e.mean_ms,
            "true_unchecked_ms_median": tu.median_ms, "true_unchecked_ms_mean": tu.mean_ms,
            "make_1000_checked_ms_median": mc.median_ms, "make_1000_unchecked_ms_median": mu.median_ms,
        }));
    }
    if json_out {
        let v = json!({"host_bash_true_ms_median": host.median_ms, "host_bash_true_ms_mean": host.mean_ms, "kvm": kvm_note, "vm": rows});
        print_stdout(&format!("{v}\n"))?;
    } else {
        print_stdout(&text)?;
    }
    Ok(exit::OK)
}
