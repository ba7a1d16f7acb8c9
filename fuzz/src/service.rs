//! The one in-process service the request targets share: started on first
//! use, on a SQLite store in a directory of its own.

use std::{
    path::{Path, PathBuf},
    sync::LazyLock,
};

use ingest::fuzzing::Api;

/// Where each fuzzing process keeps its store: `<temp>/tocsin-fuzz/<pid>`.
fn state_root() -> PathBuf {
    std::env::temp_dir().join("tocsin-fuzz")
}

struct Service {
    api: Api,
    _dir: PathBuf,
}

static SERVICE: LazyLock<Service> = LazyLock::new(|| {
    let root = state_root();
    remove_abandoned(&root);
    let dir = root.join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).expect("a directory for the fuzzing store");
    let api = Api::start(&dir).expect("the service starts");
    Service { api, _dir: dir }
});

/// The service, started on the first call.
pub fn api() -> &'static Api {
    &SERVICE.api
}

/// libFuzzer ends a run with `exit`, so no destructor removes a process's
/// store; the next run removes those of processes that are gone.
fn remove_abandoned(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let alive = entry
            .file_name()
            .to_str()
            .is_some_and(|pid| Path::new("/proc").join(pid).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
