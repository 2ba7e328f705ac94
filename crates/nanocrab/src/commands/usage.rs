//! `nanocrab usage`: tokens and estimated cost per model and per session, read back from the
//! transcripts (archived ones included) and priced with the built-in table or the user's own
//! prices.

use std::collections::BTreeMap;

use anyhow::bail;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use nanocrab_provider::{ModelPricing, PRICES_AS_OF, PriceSource, model_pricing};
use nanocrab_schema::{RunSource, SessionKey, Usage};
use nanocrab_sessions::read_usage;
use serde_json::{Value, json};

use super::Env;
use crate::cli::UsageArgs;

/// Model calls added up: their tokens and what they cost, as far as prices are known.
#[derive(Debug, Default)]
struct Tally {
    calls: u64,
    usage: Usage,
    /// US dollars of the calls whose model has a price.
    known_cost: f64,
    /// Calls whose model has no price: their cost is unknown, not zero.
    unpriced: u64,
}

impl Tally {
    fn add(&mut self, usage: Usage, pricing: Option<&ModelPricing>) {
        self.calls += 1;
        self.usage += usage;
        match pricing.and_then(|p| p.source.price()) {
            Some(price) => self.known_cost += price.cost(&usage),
            None => self.unpriced += 1,
        }
    }

    fn tokens(&self) -> u64 {
        let u = &self.usage;
        u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    }

    fn cost_text(&self) -> String {
        if self.calls > 0 && self.unpriced == self.calls {
            "?".to_owned()
        } else if self.unpriced > 0 {
            format!("{} + ?", dollars(self.known_cost))
        } else {
            dollars(self.known_cost)
        }
    }

    fn token_cells(&self) -> [String; 4] {
        let u = &self.usage;
        [
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
        ]
        .map(thousands)
    }

    /// `fields` followed by the figures, as one JSON object. `cost` is null when any call's
    /// price is unknown; `knownCost` then holds what the priced calls cost.
    fn json<const N: usize>(&self, fields: [(&str, Value); N]) -> Value {
        let u = &self.usage;
        // Rounded to a millionth of a dollar, so sums print without float noise.
        let known_cost = (self.known_cost * 1_000_000.0).round() / 1_000_000.0;
        let figures = [
            ("calls", json!(self.calls)),
            ("inputTokens", json!(u.input_tokens)),
            ("outputTokens", json!(u.output_tokens)),
            ("cacheReadTokens", json!(u.cache_read_tokens)),
            ("cacheWriteTokens", json!(u.cache_write_tokens)),
            ("tokens", json!(self.tokens())),
            ("cost", json!((self.unpriced == 0).then_some(known_cost))),
            ("knownCost", json!(known_cost)),
            ("unpricedCalls", json!(self.unpriced)),
        ];
        Value::Object(
            fields
                .into_iter()
                .chain(figures)
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
        )
    }
}

#[derive(Debug, Default)]
struct SessionTally {
    turns: u64,
    tally: Tally,
    last_activity: Option<Timestamp>,
}

/// A model as the transcripts name it (`None`: the record does not say) and its price.
type Prices = BTreeMap<Option<String>, Option<ModelPricing>>;

pub fn run(env: &Env, args: UsageArgs) -> anyhow::Result<()> {
    let config = env.load_config()?.config;
    report(env, &config, args, &mut std::io::stdout().lock())
}

/// What `nanocrab usage` prints, written to `out`; the web page's `/api/usage` takes the JSON.
pub fn report(
    env: &Env,
    config: &nanocrab_config::Config,
    args: UsageArgs,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let sessions_dir = env.paths.sessions_dir();
    let only = args.session.as_deref().map(SessionKey::parse).transpose()?;
    let mut transcripts = read_usage(&sessions_dir, only.as_ref())?;
    if let Some(key) = &only
        && transcripts.is_empty()
    {
        bail!("no session {key} in {}", sessions_dir.display());
    }
    for transcript in &mut transcripts {
        for turn in &mut transcript.turns {
            // With --since, a call whose time cannot be read cannot be shown to be recent.
            turn.calls.retain(|call| {
                args.since.is_none_or(|since| {
                    call.timestamp
                        .parse::<Timestamp>()
                        .is_ok_and(|at| at >= since)
                })
            });
        }
        transcript.turns.retain(|turn| !turn.calls.is_empty());
    }
    let calls = || {
        transcripts
            .iter()
            .flat_map(|t| &t.turns)
            .flat_map(|turn| &turn.calls)
    };
    let mut prices = Prices::new();
    for call in calls() {
        prices
            .entry(call.model.clone())
            .or_insert_with(|| call.model.as_deref().map(|m| model_pricing(m, config)));
    }
    let pricing = |model: &Option<String>| prices.get(model).and_then(Option::as_ref);
    let config_file = env
        .config_path
        .file_name()
        .map_or("config.json".into(), |name| name.to_string_lossy());
    let tz = TimeZone::system();
    let since_json = args.since.map(|since| since.to_string());
    let turn_count: u64 = transcripts.iter().map(|t| t.turns.len() as u64).sum();

    let mut by_model: BTreeMap<&Option<String>, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    for call in calls() {
        let price = pricing(&call.model);
        by_model
            .entry(&call.model)
            .or_default()
            .add(call.usage, price);
        total.add(call.usage, price);
    }
    let mut models: Vec<(&Option<String>, Tally)> = by_model.into_iter().collect();
    // The most expensive first.
    models.sort_by(|(a_model, a), (b_model, b)| {
        b.known_cost
            .total_cmp(&a.known_cost)
            .then_with(|| a_model.cmp(b_model))
    });
    let mut model_json = Vec::new();
    let mut model_rows = Vec::new();
    let mut notes = Vec::new();
    for (model, tally) in &models {
        let pricing = pricing(model);
        let source = pricing.map_or(PriceSource::Unknown, |p| p.source);
        let (source_name, source_label) = match source {
            PriceSource::Config(_) => ("config", "config"),
            PriceSource::BuiltIn { .. } => ("builtIn", "built-in"),
            PriceSource::Local => ("local", "local"),
            PriceSource::Unknown => ("unknown", "unknown"),
        };
        model_json.push(tally.json([
            ("model", json!(model)),
            ("priceSource", json!(source_name)),
            (
                "price",
                json!(source.price().map(|price| json!({
                    "input": price.input,
                    "output": price.output,
                    "cacheRead": price.cache_read,
                    "cacheWrite": price.cache_write,
                }))),
            ),
            ("priceKey", json!(pricing.map(|p| &p.config_key))),
        ]));
        let label = model.as_deref().unwrap_or("(not recorded)");
        let [input, output, cache_read, cache_write] = tally.token_cells();
        model_rows.push(Row::Cells(vec![
            label.to_owned(),
            source_label.to_owned(),
            thousands(tally.calls),
            input,
            output,
            cache_read,
            cache_write,
            tally.cost_text(),
        ]));
        if tally.unpriced > 0 {
            notes.push(match pricing {
                Some(pricing) => format!(
                    "? {label}: no price known; set {} in {config_file} (US$ per million tokens)",
                    pricing.config_key
                ),
                None => format!("? {label}: the transcript does not say which model answered"),
            });
        }
    }
    if prices
        .values()
        .flatten()
        .any(|p| matches!(p.source, PriceSource::BuiltIn { .. }))
    {
        notes.push(format!(
            "Built-in prices are estimates as of {PRICES_AS_OF}; \
             providers.<provider>.models.<model>.price in {config_file} overrides them."
        ));
    }

    if let Some(key) = only {
        let mut turns_json = Vec::new();
        let mut rows = Vec::new();
        for transcript in transcripts.iter().filter(|t| !t.turns.is_empty()) {
            let file = transcript
                .path
                .strip_prefix(&sessions_dir)
                .unwrap_or(&transcript.path)
                .display()
                .to_string();
            rows.push(Row::Note(if transcript.archived {
                format!("archived: {file}")
            } else {
                format!("current: {file}")
            }));
            for turn in &transcript.turns {
                let mut tally = Tally::default();
                let mut turn_models: Vec<&str> = Vec::new();
                for call in &turn.calls {
                    tally.add(call.usage, pricing(&call.model));
                    let model = call.model.as_deref().unwrap_or("(not recorded)");
                    if !turn_models.contains(&model) {
                        turn_models.push(model);
                    }
                }
                let started_at = turn
                    .started_at
                    .as_deref()
                    .or(turn.calls.first().map(|c| c.timestamp.as_str()))
                    .unwrap_or_default();
                turns_json.push(tally.json([
                    ("startedAt", json!(started_at)),
                    ("transcript", json!(file)),
                    ("archived", json!(transcript.archived)),
                    ("models", json!(turn_models)),
                ]));
                let [input, output, cache_read, cache_write] = tally.token_cells();
                rows.push(Row::Cells(vec![
                    local_time(started_at, &tz),
                    turn_models.join(", "),
                    thousands(tally.calls),
                    input,
                    output,
                    cache_read,
                    cache_write,
                    tally.cost_text(),
                ]));
            }
        }
        if args.json {
            let body = json!({
                "session": key.as_str(),
                "since": since_json,
                "pricesAsOf": PRICES_AS_OF,
                "turns": turns_json,
                "models": model_json,
                "total": total.json([("turns", json!(turn_count))]),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        } else if turn_count == 0 {
            writeln!(
                out,
                "no usage recorded in session {key}{}",
                since_note(args.since, &tz)
            )?;
        } else {
            writeln!(out, "session {key}\n")?;
            let header = [
                "time",
                "models",
                "calls",
                "input",
                "output",
                "cache read",
                "cache write",
                "est. cost",
            ];
            writeln!(out, "{}\n", table(&header, &[0, 1], &rows))?;
            writeln!(
                out,
                "total: {}, {}",
                count(turn_count, "turn"),
                summary(&total)
            )?;
            print_notes(out, &notes)?;
        }
        return Ok(());
    }

    // Who started the turns: the user (chat) or nanocrab on its own (heartbeat, cron,
    // subagent), in that order.
    let mut by_source: BTreeMap<usize, (&str, u64, Tally)> = BTreeMap::new();
    for turn in transcripts.iter().flat_map(|t| &t.turns) {
        let rank = match turn.source {
            RunSource::Chat => 0,
            RunSource::Heartbeat => 1,
            RunSource::Cron { .. } => 2,
            RunSource::Subagent { .. } => 3,
        };
        let (_, turns, tally) =
            by_source
                .entry(rank)
                .or_insert((turn.source.kind(), 0, Tally::default()));
        *turns += 1;
        for call in &turn.calls {
            tally.add(call.usage, pricing(&call.model));
        }
    }
    let sources_json: Vec<Value> = by_source
        .values()
        .map(|(kind, turns, tally)| tally.json([("source", json!(kind)), ("turns", json!(turns))]))
        .collect();
    let mut by_session: BTreeMap<&SessionKey, SessionTally> = BTreeMap::new();
    for transcript in &transcripts {
        for turn in &transcript.turns {
            let session = by_session.entry(&transcript.key).or_default();
            session.turns += 1;
            for call in &turn.calls {
                session.tally.add(call.usage, pricing(&call.model));
                if let Ok(at) = call.timestamp.parse::<Timestamp>() {
                    session.last_activity = session.last_activity.max(Some(at));
                }
            }
        }
    }
    let mut sessions: Vec<(&SessionKey, SessionTally)> = by_session.into_iter().collect();
    // The most recently used first, as `nanocrab sessions list`.
    sessions.sort_by(|(a_key, a), (b_key, b)| {
        b.last_activity
            .cmp(&a.last_activity)
            .then_with(|| a_key.cmp(b_key))
    });
    if args.json {
        let sessions_json: Vec<Value> = sessions
            .iter()
            .map(|(key, session)| {
                session.tally.json([
                    ("key", json!(key.as_str())),
                    ("turns", json!(session.turns)),
                    (
                        "lastActivity",
                        json!(session.last_activity.map(|at| at.to_string())),
                    ),
                ])
            })
            .collect();
        let body = json!({
            "since": since_json,
            "pricesAsOf": PRICES_AS_OF,
            "models": model_json,
            "sources": sources_json,
            "sessions": sessions_json,
            "total": total.json([
                ("sessions", json!(sessions.len())),
                ("turns", json!(turn_count)),
            ]),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(());
    }
    if sessions.is_empty() {
        writeln!(
            out,
            "no usage recorded in {}{}",
            sessions_dir.display(),
            since_note(args.since, &tz)
        )?;
        return Ok(());
    }
    let model_header = [
        "model",
        "price",
        "calls",
        "input",
        "output",
        "cache read",
        "cache write",
        "est. cost",
    ];
    writeln!(out, "{}\n", table(&model_header, &[0, 1], &model_rows))?;
    // Only the user's own turns: the split would say nothing.
    if by_source.keys().any(|rank| *rank > 0) {
        let source_rows: Vec<Row> = by_source
            .values()
            .map(|(kind, turns, tally)| {
                Row::Cells(vec![
                    (*kind).to_owned(),
                    thousands(*turns),
                    thousands(tally.calls),
                    thousands(tally.tokens()),
                    tally.cost_text(),
                ])
            })
            .collect();
        let source_header = ["started by", "turns", "calls", "tokens", "est. cost"];
        writeln!(out, "{}\n", table(&source_header, &[0], &source_rows))?;
    }
    let session_rows: Vec<Row> = sessions
        .iter()
        .map(|(key, session)| {
            Row::Cells(vec![
                key.to_string(),
                thousands(session.turns),
                thousands(session.tally.tokens()),
                session.tally.cost_text(),
                session
                    .last_activity
                    .map_or("-".into(), |at| local_time(&at.to_string(), &tz)),
            ])
        })
        .collect();
    let session_header = ["session", "turns", "tokens", "est. cost", "last activity"];
    writeln!(out, "{}\n", table(&session_header, &[0, 4], &session_rows))?;
    writeln!(
        out,
        "total: {}, {}, {}",
        count(sessions.len() as u64, "session"),
        count(turn_count, "turn"),
        summary(&total)
    )?;
    print_notes(out, &notes)?;
    Ok(())
}

fn print_notes(out: &mut dyn std::io::Write, notes: &[String]) -> std::io::Result<()> {
    if !notes.is_empty() {
        writeln!(out)?;
    }
    for note in notes {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// `5 calls, 1,234 tokens (1,000 input, 234 output, 0 cache read, 0 cache write), est. cost $0.0123`
fn summary(total: &Tally) -> String {
    let [input, output, cache_read, cache_write] = total.token_cells();
    format!(
        "{}, {} ({input} input, {output} output, {cache_read} cache read, \
         {cache_write} cache write), est. cost {}",
        count(total.calls, "call"),
        count(total.tokens(), "token"),
        total.cost_text()
    )
}

/// `1 turn`, `1,024 turns`.
fn count(n: u64, noun: &str) -> String {
    let plural = if n == 1 { "" } else { "s" };
    format!("{} {noun}{plural}", thousands(n))
}

fn since_note(since: Option<Timestamp>, tz: &TimeZone) -> String {
    since.map_or(String::new(), |at| {
        format!(" since {}", local_time(&at.to_string(), tz))
    })
}

/// A stored RFC 3339 time as `YYYY-MM-DD HH:MM` in the local time zone; as stored if it
/// does not parse.
fn local_time(stored: &str, tz: &TimeZone) -> String {
    match stored.parse::<Timestamp>() {
        Ok(at) => at
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M")
            .to_string(),
        Err(_) => stored.to_owned(),
    }
}

/// `$0.0123` below a dollar, `$12.34` from one.
fn dollars(amount: f64) -> String {
    if amount < 1.0 {
        format!("${amount:.4}")
    } else {
        format!("${amount:.2}")
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

enum Row {
    Cells(Vec<String>),
    /// A line of its own between rows, not aligned to the columns.
    Note(String),
}

/// Columns whose index is in `left` are left-aligned, the others (numbers) right-aligned.
fn table(header: &[&str], left: &[usize], rows: &[Row]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        if let Row::Cells(cells) = row {
            for (width, cell) in widths.iter_mut().zip(cells) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, width))| {
                if left.contains(&i) {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![line(header.to_vec())];
    for row in rows {
        lines.push(match row {
            Row::Cells(cells) => line(cells.iter().map(String::as_str).collect()),
            Row::Note(note) => note.clone(),
        });
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn numbers_and_costs_read_easily() {
        assert_eq!(
            [0, 999, 1_000, 12_345, 1_234_567].map(thousands),
            ["0", "999", "1,000", "12,345", "1,234,567"].map(String::from)
        );
        assert_eq!(
            [0.0, 0.012_34, 0.999_9, 1.0, 12.345_6].map(dollars),
            ["$0.0000", "$0.0123", "$0.9999", "$1.00", "$12.35"].map(String::from)
        );
    }
}
