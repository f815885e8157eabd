//! What Linux's `/proc` says about a process: its resident memory and its open files. Used by
//! the soak scenario for its own process and by the hostile-input tests for a server's.

/// Which process to read: this one, or another by pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Current,
    Pid(u32),
}

impl Process {
    fn dir(self) -> String {
        match self {
            Process::Current => "/proc/self".to_string(),
            Process::Pid(pid) => format!("/proc/{pid}"),
        }
    }

    /// The resident set (`VmRSS`) in KiB; `None` where `/proc` cannot tell (not Linux, gone).
    pub fn resident_kib(self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("{}/status", self.dir())).ok()?;
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()
    }

    /// Open file descriptors; `None` where `/proc` cannot tell.
    pub fn open_files(self) -> Option<u64> {
        Some(std::fs::read_dir(format!("{}/fd", self.dir())).ok()?.count() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_by_either_name() {
        let rss = Process::Current.resident_kib().expect("VmRSS of this process");
        assert!(rss > 0);
        let by_pid = Process::Pid(std::process::id()).resident_kib().expect("VmRSS by pid");
        assert!(by_pid > 0);
        let file = std::fs::File::open("/proc/self/status").expect("open a file");
        let open = Process::Current.open_files().expect("open files");
        assert!(open >= 4, "stdin, stdout, stderr and the file just opened: {open}");
        drop(file);
        assert_eq!(Process::Pid(u32::MAX).resident_kib(), None, "no such process");
    }
}
