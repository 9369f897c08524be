//! `abhed doctor`: what this host can run, checked rather than assumed. The sandbox part boots
//! the VM: KVM by a timed probe (never by the mere presence of /dev/kvm), then TCG.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};

use abhed::config::Config;
use abhed::sandbox::image::Image;
use abhed::sandbox::vm::{BootSpec, MicroVm};
use abhed::sandbox::{BACKEND, KVM_PROBE_DEADLINE, find_qemu, try_kvm};

use super::{Failure, exit, print_stdout, workspace_dir};

#[derive(Args)]
pub struct DoctorArgs {
    /// The workspace whose config applies (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Lists the guest's network interfaces with bash alone, so that the probe works whatever of the
/// host's /usr is shared.
const NET_PROBE: &str = "echo ok; for n in /sys/class/net/*; do echo \"${n##*/}\"; done";

/// One line of the report.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    extra: Value,
}

pub fn run(a: DoctorArgs) -> Result<u8, Failure> {
    let ws = workspace_dir(a.workspace, None)?;
    let config = Config::load(&ws).map_err(|e| Failure::usage(format!("{e:#}")))?;
    let sb = &config.sandbox;
    let mut checks = Vec::new();
    for w in &config.warnings {
        eprintln!("abhed: {w}");
    }

    // Reported, not refused: doctor is where an operator finds out why run would refuse.
    checks.push(match abhed::boundary::check_workspace(&ws, &config) {
        Ok(()) => Check {
            name: "workspace",
            ok: true,
            detail: format!("{}: not a system directory, and holds none of abhed's own files", ws.display()),
            extra: json!({"path": ws}),
        },
        Err(e) => Check { name: "workspace", ok: false, detail: e.to_string(), extra: json!({"path": ws}) },
    });

    let cpu = abhed::cpu::check();
    checks.push(Check {
        name: "cpu",
        ok: cpu.ok(),
        detail: if cpu.ok() {
            format!("this build is for {} ({}); this CPU has all of it", cpu.name, cpu.required.join(", "))
        } else {
            // Unreachable in practice: the start-up guard refuses to run on such a CPU.
            format!("this build is for {}, and this CPU lacks {}", cpu.name, cpu.missing.join(", "))
        },
        extra: json!({"baseline": cpu.name, "required": cpu.required, "missing": cpu.missing}),
    });

    if let Some(root) = abhed::install::current_root() {
        checks.push(match abhed::install::verify(&root) {
            Ok(i) => Check {
                name: "install",
                ok: true,
                detail: format!(
                    "abhed {} installed from its bundle in {}: all {} files match its SHA256SUMS",
                    i.version,
                    i.root.display(),
                    i.files
                ),
                extra: json!({"root": i.root, "version": i.version, "files": i.files}),
            },
            Err(e) => Check { name: "install", ok: false, detail: e, extra: json!({"root": root}) },
        });
    }

    let qemu = find_qemu(sb.qemu.as_deref());
    match &qemu {
        Ok(q) => {
            let version = q.version();
            let whose =
                if q.bundled { "the bundle's, started through its own loader and libraries" } else { "the host's" };
            checks.push(Check {
                name: "qemu",
                ok: !version.is_empty(),
                detail: if version.is_empty() {
                    format!("{} ({whose}) does not start: `--version` printed nothing", q.binary.display())
                } else {
                    format!("{} ({version}; {whose})", q.binary.display())
                },
                extra: json!({"path": q.binary, "version": version, "bundled": q.bundled}),
            });
        }
        Err(e) => checks.push(Check { name: "qemu", ok: false, detail: e.to_string(), extra: Value::Null }),
    }

    let image = Image::locate(sb.image_dir.as_deref(), &abhed::layout::search_dirs("vm"));
    match &image {
        Ok(img) => {
            let pkgs: Vec<String> = img.manifest.packages.iter().map(|p| format!("{} {}", p.name, p.version)).collect();
            checks.push(Check {
                name: "image",
                ok: true,
                detail: format!(
                    "{}: checksums match its manifest (kernel {}; {})",
                    img.dir.display(),
                    img.manifest.kernel_release,
                    pkgs.join(", ")
                ),
                extra: json!({"dir": img.dir, "manifest": img.manifest}),
            });
        }
        Err(e) => checks.push(Check { name: "image", ok: false, detail: e.clone(), extra: Value::Null }),
    }

    if let (Ok(qemu), Ok(img)) = (&qemu, &image) {
        let spec = BootSpec::from_config(sb, qemu.clone(), vec![ws.clone()]);
        let kvm = try_kvm(img, &spec).map(|vm| vm.boot_ms());
        checks.push(match &kvm {
            Ok(ms) => Check {
                name: "kvm",
                ok: true,
                detail: format!("works: a probe boot was ready in {ms} ms"),
                extra: json!({"works": true, "boot_ms": ms}),
            },
            Err(e) => Check {
                name: "kvm",
                ok: true,
                detail: format!(
                    "not usable (the probe boot failed within {} s: {e}); TCG is used",
                    KVM_PROBE_DEADLINE.as_secs()
                ),
                extra: json!({"works": false, "detail": e}),
            },
        });
        let start = Instant::now();
        match MicroVm::boot(img, &spec) {
            Ok(mut vm) => {
                let probe = vm.exec(1, NET_PROBE, &ws, &ws, 30_000, &Default::default());
                let (ok, detail) = match probe {
                    Ok(r) if r.exit_code == Some(0) => {
                        let out = format!("{}{}", r.output.head, r.output.tail);
                        let nets: Vec<&str> = out.lines().skip(1).collect();
                        (
                            nets == ["lo"],
                            format!(
                                "booted under TCG in {} ms, a command ran; network interfaces: {}",
                                start.elapsed().as_millis(),
                                nets.join(" ")
                            ),
                        )
                    }
                    Ok(r) => (false, format!("a command failed in the VM: exit {:?}, {}", r.exit_code, r.output.head)),
                    Err(e) => (false, e.to_string()),
                };
                checks.push(Check {
                    name: "tcg",
                    ok,
                    detail,
                    extra: json!({"boot_ms": vm.boot_ms(), "shell": vm.shell()}),
                });
            }
            Err(e) => checks.push(Check { name: "tcg", ok: false, detail: e.to_string(), extra: Value::Null }),
        }
        let chosen = match (sb.accel.as_str(), &kvm) {
            ("tcg", _) => "tcg",
            ("kvm", _) => "kvm",
            (_, Ok(_)) => "kvm",
            (_, Err(_)) => "tcg",
        };
        checks.push(Check {
            name: "backend",
            ok: true,
            detail: format!(
                "{BACKEND} ({chosen}; sandbox.accel = {:?}); host /usr shared read-only: {}",
                sb.accel, sb.share_host_usr
            ),
            extra: json!({"backend": BACKEND, "accel": chosen}),
        });
    } else {
        checks.push(Check {
            name: "backend",
            ok: false,
            detail: "none: bash fails closed (it never runs on the host) until QEMU and the image are there".into(),
            extra: json!({"backend": null}),
        });
    }

    let model = abhed::model::locate::model_path(config.model.path.as_deref());
    checks.push(match model {
        Ok(p) => Check { name: "model", ok: true, detail: p.display().to_string(), extra: json!({"path": p}) },
        Err(e) => Check { name: "model", ok: false, detail: format!("{e:#}"), extra: Value::Null },
    });

    let all_ok = checks.iter().all(|c| c.ok);
    if a.json {
        let report: serde_json::Map<String, Value> = checks
            .iter()
            .map(|c| (c.name.to_string(), json!({"ok": c.ok, "detail": c.detail, "facts": c.extra})))
            .collect();
        print_stdout(&format!("{}\n", json!({"ok": all_ok, "checks": report})))?;
    } else {
        let mut text = String::new();
        for c in &checks {
            text.push_str(&format!("{:<8} {:<4} {}\n", c.name, if c.ok { "ok" } else { "FAIL" }, c.detail));
        }
        print_stdout(&text)?;
    }
    Ok(if all_ok { exit::OK } else { exit::TOOL_ERROR })
}
