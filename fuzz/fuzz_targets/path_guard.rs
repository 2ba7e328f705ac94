//! Whatever path the guard accepts (read, write, or as a command argument relative to two
//! working directories) is inside the workspace, also once the kernel follows the links in
//! it, and a write never lands in a protected path.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nanocrab_fuzz::{fixture, really_inside};

fuzz_target!(|data: &[u8]| {
    let Some((&op, rest)) = data.split_first() else {
        return;
    };
    let fx = fixture();
    let asked = String::from_utf8_lossy(rest);
    let (what, result) = match op % 4 {
        0 => ("read", fx.guard.check_read(&asked)),
        1 => ("write", fx.guard.check_write(&asked)),
        2 => ("argument in ws", fx.guard.check_argument(&fx.ws, &asked)),
        _ => (
            "argument in ws/notes",
            fx.guard.check_argument(&fx.ws.join("notes"), &asked),
        ),
    };
    if let Ok(resolved) = result {
        assert!(
            really_inside(&resolved, &fx.ws),
            "{what} {asked:?} was allowed as {}",
            resolved.display()
        );
        if what == "write" {
            assert!(
                !resolved.starts_with(&fx.protected),
                "write {asked:?} was allowed into the protected {}",
                resolved.display()
            );
        }
    }
});
