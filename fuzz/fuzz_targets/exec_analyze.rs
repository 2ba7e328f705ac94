//! The exec analysis never panics on any text, and what allowlist mode accepts runs only
//! default safe bins whose path-like arguments the guard accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nanocrab_config::{ExecConfig, ExecMode};
use nanocrab_fuzz::fixture;
use nanocrab_policy::{DEFAULT_SAFE_BINS, ExecPlan, ExecPolicy};

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let command = String::from_utf8_lossy(data);
    let Ok(policy) = ExecPolicy::new(&ExecConfig {
        mode: ExecMode::Allowlist,
        ..ExecConfig::default()
    }) else {
        return;
    };
    let Ok(plan) = policy.analyze(&command, &fx.ws, &fx.guard) else {
        return;
    };
    let ExecPlan::Pipeline(segments) = plan else {
        panic!("allowlist mode planned a shell for {command:?}");
    };
    assert!(!segments.is_empty(), "{command:?} planned nothing");
    for argv in &segments {
        let Some((program, args)) = argv.split_first() else {
            panic!("{command:?} planned an empty argv");
        };
        assert!(
            DEFAULT_SAFE_BINS.contains(&program.as_str()),
            "{command:?} runs {program:?}"
        );
        let mut options_ended = false;
        for arg in args {
            if arg == "--" && !options_ended {
                options_ended = true;
                continue;
            }
            if arg.starts_with('-') && !options_ended {
                continue;
            }
            let path_like = arg.starts_with(['/', '~', '.'])
                || arg.contains('/')
                || std::fs::symlink_metadata(fx.ws.join(arg)).is_ok();
            if path_like {
                assert!(
                    fx.guard.check_argument(&fx.ws, arg).is_ok(),
                    "{command:?} passes {arg:?}, which the guard refuses"
                );
            }
        }
    }
});
