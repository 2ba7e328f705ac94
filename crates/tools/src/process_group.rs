//! A command's process group, killed whole: `exec` and the hooks start every command as the
//! leader of a group of its own.

/// Kills the whole process group when dropped unless the command finished, so a timeout or
/// a cancelled turn also takes grandchildren (`sh -c 'sleep 999 &'`) down.
#[derive(Debug, Default)]
pub struct ProcessGroup {
    /// The group's id: the pid of its leader; `None` once it finished or was killed.
    pub pgid: Option<u32>,
}

impl ProcessGroup {
    #[allow(unsafe_code)]
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take().and_then(|p| libc::pid_t::try_from(p).ok()) {
            // SAFETY: killpg takes two integers and only sends a signal; the group id is the
            // pid of a child we spawned as the group's leader, so it cannot name our own group.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}
