//! The launcher's restrictions on Linux: resource limits, read-only binds, capabilities,
//! Landlock, seccomp, in that order. The binds need the capabilities that the next step drops,
//! and seccomp goes last because it may deny syscalls the steps before it still make.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::{
    Bind, EXIT_NOT_FOUND, EXIT_SETUP_FAILED, Failure, ResourceLimits, SandboxError, SandboxPolicy,
};

/// The filesystem rights the ruleset handles. V5 (Linux 6.10) is the newest with new
/// filesystem rights; older kernels get what they know (best effort), newer ones add nothing
/// for files.
const FS_ABI: ABI = ABI::V5;

pub(crate) fn probe() -> Result<(), SandboxError> {
    // Creating a ruleset asks the kernel for Landlock without restricting anything.
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|ruleset| ruleset.create())
        .map_err(|err| SandboxError::Unavailable {
            feature: "Landlock",
            reason: format!(
                "is not available in this kernel (it needs Linux 5.13 or later with `landlock` \
                 in the active LSMs): {err}"
            ),
        })?;
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|err| SandboxError::Unavailable {
            feature: "seccomp",
            reason: format!("cannot be checked: /proc/self/status: {err}"),
        })?;
    if !has_seccomp(&status) {
        return Err(SandboxError::Unavailable {
            feature: "seccomp",
            reason: "is not built into this kernel (CONFIG_SECCOMP_FILTER)".into(),
        });
    }
    Ok(())
}

/// A kernel with seccomp reports the process's mode in `/proc/<pid>/status`.
fn has_seccomp(proc_status: &str) -> bool {
    proc_status.lines().any(|line| line.starts_with("Seccomp:"))
}

pub(crate) fn restrict_and_exec(
    policy: &SandboxPolicy,
    argv: &[OsString],
) -> Result<std::convert::Infallible, Failure> {
    let setup = |message: String| (EXIT_SETUP_FAILED, message);
    // Built before anything is restricted so that a bad filter is a setup error, not a
    // half-sandboxed command.
    let filter = seccomp_filter(policy.network).map_err(setup)?;
    set_limits(&policy.limits)
        .map_err(|err| setup(format!("cannot set a resource limit: {err}")))?;
    bind_read_only(&policy.binds()).map_err(setup)?;
    drop_capabilities().map_err(setup)?;
    landlock(policy).map_err(setup)?;
    seccompiler::apply_filter(&filter)
        .map_err(|err| setup(format!("cannot install the seccomp filter: {err}")))?;
    let Some((program, args)) = argv.split_first() else {
        return Err(setup("no program to run".into()));
    };
    let mut command = Command::new(program);
    command.args(args);
    if let Some(tmp) = &policy.tmp_dir {
        command.env("TMPDIR", tmp);
    }
    let err = command.exec();
    let code = match err.kind() {
        std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
        _ => EXIT_SETUP_FAILED,
    };
    Err((
        code,
        format!("cannot run {}: {err}", program.to_string_lossy()),
    ))
}

/// Only ever lowers a limit: raising a hard limit needs privileges, and nanocrab's own limits
/// stay the ceiling.
fn set_limits(limits: &ResourceLimits) -> std::io::Result<()> {
    use rlimit::Resource;
    let lower = |resource: Resource, soft: u64, hard: u64| -> std::io::Result<()> {
        let (_, current_hard) = resource.get()?;
        let hard = hard.min(current_hard);
        resource.set(soft.min(hard), hard)
    };
    if let Some(bytes) = limits.address_space_bytes {
        lower(Resource::AS, bytes, bytes)?;
    }
    if let Some(seconds) = limits.cpu_seconds {
        // SIGXCPU at the soft limit lets the program report it; SIGKILL one second later.
        lower(Resource::CPU, seconds, seconds.saturating_add(1))?;
    }
    if let Some(bytes) = limits.file_size_bytes {
        lower(Resource::FSIZE, bytes, bytes)?;
    }
    if let Some(files) = limits.open_files {
        lower(Resource::NOFILE, files, files)?;
    }
    Resource::CORE.set(0, 0)
}

/// Makes the binds in a mount namespace of the command's own (inside a user namespace when not
/// root, where the mounts of the namespace's owner are ours to make). Nothing outside sees
/// these mounts, and the command cannot undo them: Landlock forbids mounting to a sandboxed
/// process, and it has no capabilities left.
fn bind_read_only(binds: &[Bind]) -> Result<(), String> {
    use nix::sched::CloneFlags;
    use rustix::mount::{
        MountFlags, MountPropagationFlags, mount_bind, mount_change, mount_remount,
    };

    if binds.is_empty() {
        return Ok(());
    }
    let uid = rustix::process::getuid();
    let gid = rustix::process::getgid();
    let namespaces = if uid.is_root() {
        CloneFlags::CLONE_NEWNS
    } else {
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS
    };
    nix::sched::unshare(namespaces).map_err(|err| {
        format!("cannot create a mount namespace to keep the protected paths read-only: {err}")
    })?;
    if !uid.is_root() {
        // The command keeps its own ids; writing gid_map unprivileged needs setgroups off.
        for (file, content) in [
            ("/proc/self/setgroups", "deny".to_owned()),
            ("/proc/self/uid_map", format!("{0} {0} 1", uid.as_raw())),
            ("/proc/self/gid_map", format!("{0} {0} 1", gid.as_raw())),
        ] {
            std::fs::write(file, content)
                .map_err(|err| format!("cannot write {file} in the user namespace: {err}"))?;
        }
    }
    mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
    .map_err(|err| format!("cannot stop mounts propagating out of the sandbox: {err}"))?;
    for Bind { path, read_only } in binds {
        let shown = path.display();
        mount_bind(path, path).map_err(|err| format!("cannot bind {shown} over itself: {err}"))?;
        if !read_only {
            continue;
        }
        // A remount must repeat the flags the mount already has: inside a user namespace the
        // kernel refuses to clear them.
        let kept = rustix::fs::statvfs(path)
            .map_err(|err| format!("cannot read the mount flags of {shown}: {err}"))?
            .f_flag;
        let kept = [
            (rustix::fs::StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
            (rustix::fs::StatVfsMountFlags::NODEV, MountFlags::NODEV),
            (rustix::fs::StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
            (rustix::fs::StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
            (
                rustix::fs::StatVfsMountFlags::NODIRATIME,
                MountFlags::NODIRATIME,
            ),
            (
                rustix::fs::StatVfsMountFlags::RELATIME,
                MountFlags::RELATIME,
            ),
        ]
        .into_iter()
        .filter(|(statvfs, _)| kept.contains(*statvfs))
        .fold(MountFlags::empty(), |flags, (_, mount)| flags | mount);
        mount_remount(path, MountFlags::BIND | MountFlags::RDONLY | kept, "")
            .map_err(|err| format!("cannot make {shown} read-only: {err}"))?;
    }
    Ok(())
}

/// A command started as root keeps no capability: with `CAP_SYS_PTRACE` it could read
/// another process's `/proc/<pid>/environ` (nanocrab's, with its API keys) in spite of
/// Landlock, and with others read kernel memory or load code into the kernel. Dropped from the
/// bounding set as well, so that running a program as root cannot give any back. An ordinary
/// user has none to drop.
fn drop_capabilities() -> Result<(), String> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, remove_capability_from_bounding_set,
        set_capabilities,
    };

    let current = capabilities(None).map_err(|err| format!("cannot read capabilities: {err}"))?;
    if current.permitted.contains(CapabilitySet::SETPCAP) {
        for (_, capability) in CapabilitySet::all().iter_names() {
            match remove_capability_from_bounding_set(capability) {
                // One this kernel does not know.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(err) => return Err(format!("cannot drop capabilities: {err}")),
            }
        }
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|err| format!("cannot drop capabilities: {err}"))
}

fn landlock(policy: &SandboxPolicy) -> Result<(), String> {
    let writable = policy.writable();
    for path in &writable {
        if !path.exists() {
            return Err(format!(
                "the writable path {} does not exist",
                path.display()
            ));
        }
    }
    // Signals and abstract Unix sockets reach only processes in the same sandbox (Linux
    // 6.12+): the command cannot kill nanocrab or talk to a desktop session's abstract
    // sockets. Abstract sockets stay open with network, as they are local IPC.
    let scopes = if policy.network {
        Scope::Signal.into()
    } else {
        Scope::from_all(ABI::V6)
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(FS_ABI))
        .and_then(|ruleset| ruleset.scope(scopes))
        .and_then(|ruleset| ruleset.create())
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(["/"], AccessFs::from_read(FS_ABI)))
        })
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(&writable, AccessFs::from_all(FS_ABI)))
        })
        // Not /dev/tty: a command must not write to the terminal nanocrab runs in.
        .and_then(|ruleset| {
            ruleset.add_rules(path_beneath_rules(
                ["/dev/null"],
                AccessFs::from_all(FS_ABI),
            ))
        })
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|err| format!("cannot set up Landlock: {err}"))?;
    enforced(&status.ruleset, &status.landlock)
}

/// Partial enforcement (an older kernel without the newest rights) still confines writes;
/// none at all is an error, never a silent unsandboxed run.
fn enforced(ruleset: &RulesetStatus, landlock: &LandlockStatus) -> Result<(), String> {
    match (ruleset, landlock) {
        (RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced, _) => Ok(()),
        (RulesetStatus::NotEnforced, LandlockStatus::NotImplemented) => Err(
            "Landlock is not built into this kernel (ENOSYS); it needs Linux 5.13 or later".into(),
        ),
        (RulesetStatus::NotEnforced, LandlockStatus::NotEnabled) => Err(
            "Landlock is built into this kernel but not enabled (EOPNOTSUPP); add `landlock` to \
             the `lsm=` boot parameter"
                .into(),
        ),
        (RulesetStatus::NotEnforced, LandlockStatus::Available { effective_abi, .. }) => Err(
            format!("Landlock (ABI {effective_abi:?}) enforced none of the rules"),
        ),
    }
}

#[cfg(target_arch = "x86_64")]
const ARCH: Option<TargetArch> = Some(TargetArch::x86_64);
#[cfg(target_arch = "aarch64")]
const ARCH: Option<TargetArch> = Some(TargetArch::aarch64);
#[cfg(target_arch = "riscv64")]
const ARCH: Option<TargetArch> = Some(TargetArch::riscv64);
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
const ARCH: Option<TargetArch> = None;

/// Matching syscalls fail with EPERM ("Operation not permitted"), an error a program and the
/// model reading its output understand; everything else is allowed.
fn seccomp_filter(network: bool) -> Result<BpfProgram, String> {
    let arch = ARCH.ok_or("seccomp filters are not built for this CPU architecture")?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    if !network {
        for syscall in [libc::SYS_socket, libc::SYS_socketpair] {
            let not_unix = SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|err| err.to_string())?;
            rules.insert(syscall, vec![not_unix]);
        }
    }
    // io_uring performs socket and file operations without the syscalls above being made;
    // ptrace and process_vm_* reach into other processes of the same user (nanocrab's).
    for syscall in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
    ] {
        // An empty rule list matches every call of the syscall.
        rules.insert(syscall, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|err| format!("cannot build the seccomp filter: {err}"))?;
    filter
        .try_into()
        .map_err(|err: seccompiler::BackendError| format!("cannot build the seccomp filter: {err}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_filter_without_network_is_larger_than_the_one_with_it() {
        let closed = seccomp_filter(false).unwrap();
        let open = seccomp_filter(true).unwrap();
        assert!(!open.is_empty());
        // The socket and socketpair rules add an argument check each.
        assert!(
            closed.len() > open.len(),
            "{} vs {}",
            closed.len(),
            open.len()
        );
    }

    #[test]
    fn no_enforcement_is_an_error_that_names_the_cause() {
        assert_eq!(
            enforced(
                &RulesetStatus::FullyEnforced,
                &LandlockStatus::NotImplemented
            ),
            Ok(())
        );
        assert_eq!(
            enforced(
                &RulesetStatus::PartiallyEnforced,
                &LandlockStatus::NotImplemented
            ),
            Ok(())
        );
        let missing =
            enforced(&RulesetStatus::NotEnforced, &LandlockStatus::NotImplemented).unwrap_err();
        assert!(
            missing.contains("not built into this kernel (ENOSYS)"),
            "{missing}"
        );
        let disabled =
            enforced(&RulesetStatus::NotEnforced, &LandlockStatus::NotEnabled).unwrap_err();
        assert!(
            disabled.contains("add `landlock` to the `lsm=`"),
            "{disabled}"
        );
        let available = LandlockStatus::Available {
            effective_abi: ABI::V3,
            kernel_abi: None,
        };
        let none = enforced(&RulesetStatus::NotEnforced, &available).unwrap_err();
        assert_eq!(none, "Landlock (ABI V3) enforced none of the rules");
    }

    #[test]
    fn seccomp_is_detected_from_the_process_status() {
        assert!(has_seccomp(
            "Name:\tsh\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n"
        ));
        assert!(!has_seccomp("Name:\tsh\nNoNewPrivs:\t0\n"));
    }

    /// The project's machines (this one and CI: kernel 6.18, Landlock ABI 7) have both.
    #[test]
    fn this_kernel_has_landlock_and_seccomp() {
        probe().unwrap();
    }
}
