//! How search hits are ranked after retrieval: scores relative to the best hit, an optional
//! recency decay for dated notes, and optional diversity (maximal marginal relevance), then the
//! floor and the limit.

use std::collections::HashSet;

use crate::index::SearchHit;

/// How search results are ranked and cut.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    pub limit: usize,
    /// Hits scoring below this (0 to 1, relative to the best) are left out.
    pub min_score: f64,
    /// Maximal marginal relevance: each next hit balances its relevance (weight `lambda`)
    /// against its likeness to the hits already chosen (weight `1 - lambda`); `None`: off.
    pub mmr_lambda: Option<f64>,
    /// A dated note (`memory/YYYY-MM-DD.md`) loses half its score every this many days of
    /// age; undated files never decay. `None`: off.
    pub recency_half_life_days: Option<f64>,
    /// The day ages are counted from; `None`: today.
    pub today: Option<jiff::civil::Date>,
}

impl SearchOptions {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            min_score: 0.0,
            mmr_lambda: None,
            recency_half_life_days: None,
            today: None,
        }
    }

    /// The options `memory.*` in config.json set, with its `maxResults` as the limit.
    pub fn from_config(config: &nanocrab_config::MemoryConfig) -> Self {
        Self {
            min_score: config.min_score,
            mmr_lambda: config.mmr_lambda,
            recency_half_life_days: config.recency_half_life_days,
            ..Self::new(config.max_results as usize)
        }
    }

    /// How many candidates to fetch: re-ranking needs more than it keeps.
    pub(crate) fn pool(&self) -> usize {
        if self.mmr_lambda.is_some() || self.recency_half_life_days.is_some() {
            (self.limit * 4).max(32)
        } else {
            self.limit
        }
    }
}

/// `hits` come best first with raw scores (higher is better).
pub(crate) fn rank(mut hits: Vec<SearchHit>, options: &SearchOptions) -> Vec<SearchHit> {
    if let Some(half_life) = options.recency_half_life_days.filter(|h| *h > 0.0) {
        let today = options.today.unwrap_or_else(|| jiff::Zoned::now().date());
        for hit in &mut hits {
            if let Some(date) = note_date(&hit.path) {
                let age = date.until(today).map_or(0, |span| span.get_days()).max(0);
                hit.score *= 0.5_f64.powf(f64::from(age) / half_life);
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    }
    let best = hits.first().map_or(0.0, |h| h.score);
    for hit in &mut hits {
        hit.score = if best > 0.0 { hit.score / best } else { 1.0 };
    }
    hits.retain(|h| h.score >= options.min_score);
    match options.mmr_lambda {
        Some(lambda) => diversify(hits, lambda, options.limit),
        None => {
            hits.truncate(options.limit);
            hits
        }
    }
}

/// The date of a daily note, `memory/2026-03-14.md`.
fn note_date(path: &str) -> Option<jiff::civil::Date> {
    let name = path.strip_prefix("memory/")?.strip_suffix(".md")?;
    name.parse().ok()
}

fn diversify(mut pool: Vec<SearchHit>, lambda: f64, limit: usize) -> Vec<SearchHit> {
    let words = |hit: &SearchHit| -> HashSet<String> {
        hit.snippet
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_lowercase)
            .collect()
    };
    let mut pool_words: Vec<HashSet<String>> = pool.iter().map(words).collect();
    let mut chosen: Vec<SearchHit> = Vec::new();
    let mut chosen_words: Vec<HashSet<String>> = Vec::new();
    while chosen.len() < limit && !pool.is_empty() {
        let value = |i: usize| {
            let likeness = chosen_words
                .iter()
                .map(|c| jaccard(&pool_words[i], c))
                .fold(0.0, f64::max);
            lambda * pool[i].score - (1.0 - lambda) * likeness
        };
        let next = (0..pool.len())
            .max_by(|&a, &b| value(a).total_cmp(&value(b)))
            .unwrap_or(0);
        chosen.push(pool.remove(next));
        chosen_words.push(pool_words.remove(next));
    }
    chosen
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        0.0
    } else {
        a.intersection(b).count() as f64 / union as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn hit(path: &str, snippet: &str, score: f64) -> SearchHit {
        SearchHit {
            path: path.into(),
            start_line: 1,
            end_line: 1,
            heading: String::new(),
            snippet: snippet.into(),
            score,
        }
    }

    fn order(hits: &[SearchHit]) -> Vec<(&str, f64)> {
        hits.iter().map(|h| (h.path.as_str(), h.score)).collect()
    }

    #[test]
    fn dated_notes_decay_with_age_and_other_files_do_not() {
        let hits = vec![
            hit("memory/2026-01-01.md", "dentist", 10.0),
            hit("memory/2026-03-01.md", "dentist", 8.0),
            hit("memory/MEMORY.md", "dentist", 6.0),
        ];
        let options = SearchOptions {
            recency_half_life_days: Some(30.0),
            today: Some(jiff::civil::date(2026, 3, 31)),
            ..SearchOptions::new(3)
        };
        // 89 days: 10 → 1.27; 30 days: 8 → 4; undated: 6.
        let ranked = rank(hits, &options);
        let paths: Vec<&str> = ranked.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "memory/MEMORY.md",
                "memory/2026-03-01.md",
                "memory/2026-01-01.md"
            ]
        );
        assert_eq!(ranked[0].score, 1.0);
        assert!((ranked[1].score - 4.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn mmr_lets_a_different_hit_past_a_near_copy() {
        let hits = vec![
            hit("a.md", "dentist appointment tuesday morning", 1.0),
            hit("b.md", "dentist appointment tuesday morning again", 0.95),
            hit("c.md", "dentist invoice paid by card", 0.9),
        ];
        assert_eq!(
            order(&rank(hits.clone(), &SearchOptions::new(2))),
            vec![("a.md", 1.0), ("b.md", 0.95)]
        );
        let diverse = SearchOptions {
            mmr_lambda: Some(0.7),
            ..SearchOptions::new(2)
        };
        assert_eq!(
            order(&rank(hits, &diverse)),
            vec![("a.md", 1.0), ("c.md", 0.9)]
        );
    }
}
