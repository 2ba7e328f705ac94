//! Finding, compiling and (re)loading the tools in `workspace/tools/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nanocrab_policy::{Capability, Grants, PathGuard};
use wasmtime::{Config, Engine, ExternType, FuncType, Module, ValType};

use super::host::{HOST_FUNCTIONS, HOST_MODULE, HostEnv, Needs, linker};
use super::manifest;
use super::ticker::Ticker;
use super::tool::WasmTool;
use super::{MANIFEST_FILE, MODULE_FILE, WasmLoadError};
use crate::registry::ToolRegistry;
use crate::tool_search::TOOL_SEARCH;
use nanocrab_config::http::Timeouts;

#[derive(Debug, thiserror::Error)]
pub enum WasmSetupError {
    #[error("cannot set up the WASM engine: {0}")]
    Engine(String),
    #[error("cannot start the WASM wall-time thread: {0}")]
    Ticker(std::io::Error),
    #[error("cannot set up the HTTP client of WASM tools: {0}")]
    Client(String),
}

/// What one [`WasmTools::sync`] changed in the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WasmScan {
    /// Registered by this scan: new tools, and tools whose files changed.
    pub loaded: Vec<String>,
    /// Taken out of the registry: deleted, broken or no longer granted.
    pub removed: Vec<String>,
    /// Problems not reported before; each is logged once, when it first appears.
    pub refused: Vec<WasmLoadError>,
}

/// The size and modification time of a tool's two files: a change to either reloads it.
type Stamp = [Option<(u64, SystemTime)>; 2];

struct Entry {
    stamp: Stamp,
    compiled: Result<WasmTool, WasmLoadError>,
}

/// The custom tools of one workspace, kept compiled between turns.
pub struct WasmTools {
    engine: Engine,
    ticker: Arc<Ticker>,
    guard: Arc<PathGuard>,
    secrets: Arc<BTreeMap<String, String>>,
    client: reqwest::Client,
    dir: PathBuf,
    entries: BTreeMap<String, Entry>,
    /// What the last sync put in the registry, and the refusals it had already reported.
    registered: BTreeSet<String>,
    reported: BTreeSet<WasmLoadError>,
}

impl WasmTools {
    /// The tools in `<workspace>/tools/`, none loaded yet. `secrets` (name → value) are what
    /// `{{secret:NAME}}` placeholders can be replaced with, for tools granted `secret:NAME`.
    pub fn new(
        guard: Arc<PathGuard>,
        secrets: BTreeMap<String, String>,
    ) -> Result<Self, WasmSetupError> {
        let mut config = Config::new();
        config.consume_fuel(true).epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|err| WasmSetupError::Engine(err.to_string()))?;
        let ticker = Ticker::start(engine.clone()).map_err(WasmSetupError::Ticker)?;
        let client = nanocrab_config::http::client_builder(Timeouts {
            connect: Duration::from_secs(10),
            read: None,
            total: None,
        })
        // A redirect could lead to a host the tool was not granted, carrying its secrets.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| WasmSetupError::Client(err.to_string()))?;
        Ok(Self {
            engine,
            ticker: Arc::new(ticker),
            dir: guard.workspace().join("tools"),
            guard,
            secrets: Arc::new(secrets),
            client,
            entries: BTreeMap::new(),
            registered: BTreeSet::new(),
            reported: BTreeSet::new(),
        })
    }

    /// `<workspace>/tools`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Brings `registry` up to date with `workspace/tools/`: call it at the start of every
    /// turn. It only stats the files of tools it already compiled; a new or changed tool is
    /// compiled, and every tool is checked against the registry's config grants
    /// (`tools.grants`) again, so a grant added or removed in config counts at once. A tool
    /// named like one that was registered by someone else (a built-in) is refused.
    pub fn sync(&mut self, registry: &mut ToolRegistry) -> WasmScan {
        let changed = self.rescan();
        let grants = &registry.policy().grants;
        let others: BTreeSet<String> = registry
            .names()
            .into_iter()
            .filter(|name| !self.registered.contains(name))
            .collect();
        let mut ready = BTreeMap::new();
        let mut refusals = BTreeSet::new();
        for (name, entry) in &self.entries {
            let outcome = entry.compiled.clone().and_then(|tool| {
                // `tool_search` joins a turn's own copy of the registry, after this scan.
                if others.contains(name) || name == TOOL_SEARCH {
                    return Err(WasmLoadError::NameTaken {
                        tool: name.clone(),
                        dir: tool.dir().to_path_buf(),
                    });
                }
                check_grants(&tool, grants)?;
                Ok(tool)
            });
            match outcome {
                Ok(tool) => {
                    ready.insert(name.clone(), tool);
                }
                Err(err) => {
                    refusals.insert(err);
                }
            }
        }
        let mut scan = WasmScan::default();
        for name in &self.registered {
            if !ready.contains_key(name) {
                registry.unregister(name);
                scan.removed.push(name.clone());
            }
        }
        for (name, tool) in &ready {
            if !self.registered.contains(name) || changed.contains(name) {
                registry.register_deferrable(Arc::new(tool.clone()));
                scan.loaded.push(name.clone());
            }
        }
        for refusal in &refusals {
            if !self.reported.contains(refusal) {
                tracing::warn!("{refusal}");
                scan.refused.push(refusal.clone());
            }
        }
        self.registered = ready.into_keys().collect();
        self.reported = refusals;
        scan
    }

    /// Every tool that is currently not loaded, and why.
    pub fn refusals(&self) -> Vec<WasmLoadError> {
        self.reported.iter().cloned().collect()
    }

    /// Stats every tool directory, drops the deleted ones and recompiles the changed ones;
    /// returns the names it (re)compiled.
    fn rescan(&mut self) -> BTreeSet<String> {
        let mut found = BTreeMap::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let file_name = entry.file_name();
                    let Some(name) = file_name.to_str() else {
                        continue;
                    };
                    if path.is_dir() {
                        found.insert(name.to_owned(), stamp(&path));
                    }
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                tracing::warn!("cannot list {}: {err}", self.dir.display());
                // An unreadable directory must not unload working tools on a passing hiccup.
                return BTreeSet::new();
            }
        }
        self.entries.retain(|name, _| found.contains_key(name));
        let mut changed = BTreeSet::new();
        for (name, stamp) in found {
            if self
                .entries
                .get(&name)
                .is_some_and(|entry| entry.stamp == stamp)
            {
                continue;
            }
            let compiled = self.compile(&name);
            self.entries.insert(name.clone(), Entry { stamp, compiled });
            changed.insert(name);
        }
        changed
    }

    fn compile(&self, name: &str) -> Result<WasmTool, WasmLoadError> {
        let dir = self.dir.join(name);
        let manifest_path = dir.join(MANIFEST_FILE);
        let module_path = dir.join(MODULE_FILE);
        let read = |path: &Path| {
            std::fs::read(path).map_err(|err| WasmLoadError::Io {
                path: path.to_path_buf(),
                reason: err.to_string(),
            })
        };
        let text = read(&manifest_path)?;
        let text = String::from_utf8(text).map_err(|_| WasmLoadError::Manifest {
            path: manifest_path.clone(),
            key: ".".into(),
            reason: "not UTF-8".into(),
        })?;
        let manifest = manifest::parse(&manifest_path, name, &text)?;
        let bytes = read(&module_path)?;
        let module = Module::new(&self.engine, &bytes).map_err(|err| WasmLoadError::Compile {
            path: module_path.clone(),
            reason: format!("{err:#}"),
        })?;
        let abi = |reason: String| WasmLoadError::Abi {
            path: module_path.clone(),
            reason,
        };
        check_exports(&module).map_err(abi)?;
        let fs_read = manifest.fs_read_roots().next().is_some();
        let net = manifest.net_hosts().next().is_some();
        check_imports(&module, fs_read, net).map_err(abi)?;
        let linker = linker(&self.engine, fs_read, net).map_err(|err| abi(err.to_string()))?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|err| abi(format!("{err:#}")))?;
        let workspace = self.guard.workspace();
        let env = HostEnv {
            tool: manifest.name.clone(),
            guard: Arc::clone(&self.guard),
            fs_roots: manifest
                .fs_read_roots()
                .map(|under| manifest::under_workspace(workspace, under))
                .collect(),
            net_hosts: manifest.net_hosts().map(str::to_owned).collect(),
            secret_names: manifest.secrets().map(str::to_owned).collect(),
            secrets: Arc::clone(&self.secrets),
            client: self.client.clone(),
        };
        let capabilities = manifest
            .requested
            .iter()
            .map(|requested| requested.capability(workspace))
            .collect();
        Ok(WasmTool::new(
            manifest,
            dir,
            capabilities,
            self.engine.clone(),
            pre,
            Arc::new(env),
            Arc::clone(&self.ticker),
        ))
    }
}

fn stamp(dir: &Path) -> Stamp {
    [MANIFEST_FILE, MODULE_FILE].map(|file| {
        let metadata = std::fs::metadata(dir.join(file)).ok()?;
        Some((metadata.len(), metadata.modified().ok()?))
    })
}

/// Refuses a tool unless config grants every capability its manifest requests.
fn check_grants(tool: &WasmTool, grants: &Grants) -> Result<(), WasmLoadError> {
    let missing: Vec<String> = tool
        .capabilities()
        .iter()
        .filter(|capability| grants.covering(capability).is_none())
        .map(|capability| match capability {
            // Written as the grant that would cover it, which is what the user adds.
            Capability::FsRead(path) => format!("fs.read:{}", path.display()),
            other => other.to_string(),
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(WasmLoadError::NotGranted {
            tool: tool.name().to_owned(),
            manifest: tool.dir().join(MANIFEST_FILE),
            missing,
        })
    }
}

fn check_exports(module: &Module) -> Result<(), String> {
    let expected = [
        (
            "alloc",
            FuncType::new(module.engine(), [ValType::I32], [ValType::I32]),
        ),
        (
            "run",
            FuncType::new(
                module.engine(),
                [ValType::I32, ValType::I32],
                [ValType::I64],
            ),
        ),
    ];
    match module.get_export("memory") {
        Some(ExternType::Memory(_)) => {}
        Some(_) | None => return Err("the module must export its `memory`".into()),
    }
    for (name, ty) in expected {
        let matches = match module.get_export(name) {
            Some(ExternType::Func(found)) => FuncType::eq(&found, &ty),
            Some(_) | None => false,
        };
        if !matches {
            return Err(format!(
                "the module must export the function `{name}`: {ty}"
            ));
        }
    }
    Ok(())
}

/// Every import must be a host function of `nanocrab` whose capability the manifest requests.
fn check_imports(module: &Module, fs_read: bool, net: bool) -> Result<(), String> {
    for import in module.imports() {
        let (module_name, name) = (import.module(), import.name());
        let known = HOST_FUNCTIONS
            .iter()
            .find(|(function, _)| module_name == HOST_MODULE && *function == name);
        let Some((_, needs)) = known else {
            return Err(format!(
                "it imports `{module_name}.{name}`, which nanocrab does not provide; the host \
                 functions are {}",
                HOST_FUNCTIONS
                    .iter()
                    .map(|(function, _)| format!("`{HOST_MODULE}.{function}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let missing = match needs {
            Needs::Nothing => None,
            Needs::FsRead => (!fs_read).then_some("fs.read"),
            Needs::Net => (!net).then_some("net:<host>"),
        };
        if let Some(capability) = missing {
            return Err(format!(
                "it imports `{HOST_MODULE}.{name}`, which needs the capability `{capability}`, \
                 and its tool.json does not request it"
            ));
        }
    }
    Ok(())
}
