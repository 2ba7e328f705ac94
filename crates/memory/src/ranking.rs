//! How search hits are ranked after retrieval: keyword and vector results fused, scores
//! relative to the best hit, an optional recency decay for dated notes, and optional diversity
//! (maximal marginal relevance), then the floor and the limit.

use std::collections::{HashMap, HashSet};

use nanocrab_config::Fusion;

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
    /// How keyword and vector results are combined when both are there.
    pub fusion: Fusion,
    /// With [`Fusion::Weighted`], the vector score's share (0 to 1).
    pub vector_weight: f64,
}

/// Reciprocal rank fusion's damping: rank 1 scores 1/61 and rank 10 1/70, so one method's
/// top hit does not drown the other's agreement.
const RRF_K: f64 = 60.0;

impl SearchOptions {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            min_score: 0.0,
            mmr_lambda: None,
            recency_half_life_days: None,
            today: None,
            fusion: Fusion::Weighted,
            vector_weight: 0.5,
        }
    }

    /// The options `memory.*` in config.json set, with its `maxResults` as the limit.
    pub fn from_config(config: &nanocrab_config::MemoryConfig) -> Self {
        Self {
            min_score: config.min_score,
            mmr_lambda: config.mmr_lambda,
            recency_half_life_days: config.recency_half_life_days,
            fusion: config.fusion,
            vector_weight: config.vector_weight.clamp(0.0, 1.0),
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

/// One score per chunk id from a keyword list and a vector list, each best first with raw
/// scores (higher is better), best first.
pub(crate) fn fuse(
    keyword: &[(i64, f64)],
    vector: &[(i64, f64)],
    options: &SearchOptions,
) -> Vec<(i64, f64)> {
    let mut fused: HashMap<i64, f64> = HashMap::new();
    match options.fusion {
        Fusion::Rrf => {
            for list in [keyword, vector] {
                for (rank, (id, _)) in list.iter().enumerate() {
                    *fused.entry(*id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
                }
            }
        }
        Fusion::Weighted => {
            let weight = options.vector_weight;
            for (list, share) in [(keyword, 1.0 - weight), (vector, weight)] {
                let best = list.first().map_or(0.0, |(_, score)| *score);
                // A list with no weight brings no candidates: weight 1 is vector search alone.
                if best <= 0.0 || share <= 0.0 {
                    continue;
                }
                for (id, score) in list {
                    *fused.entry(*id).or_default() += share * score.max(0.0) / best;
                }
            }
        }
    }
    let mut fused: Vec<(i64, f64)> = fused.into_iter().collect();
    // Ties by id keep the order stable from one search to the next.
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
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
    fn rrf_rewards_agreement_and_weighted_follows_the_scores() {
        let keyword = [(1, 9.0), (2, 3.0), (3, 2.9)];
        let vector = [(3, 0.8), (4, 0.7), (1, 0.2)];
        let rrf = SearchOptions {
            fusion: Fusion::Rrf,
            ..SearchOptions::new(4)
        };
        assert_eq!(
            fuse(&keyword, &vector, &rrf)
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>(),
            // 1 and 3: 1/61 + 1/63, found by both; 2 and 4: 1/62, by one. Ties go by id.
            vec![1, 3, 2, 4]
        );
        let weighted = SearchOptions {
            fusion: Fusion::Weighted,
            vector_weight: 0.5,
            ..SearchOptions::new(4)
        };
        let scores = fuse(&keyword, &vector, &weighted);
        let expected = [
            (3, 0.5 * 2.9 / 9.0 + 0.5),
            (1, 0.5 + 0.5 * 0.25),
            (4, 0.5 * 0.875),
            (2, 0.5 * 3.0 / 9.0),
        ];
        assert_eq!(scores.len(), expected.len());
        for ((id, score), (want_id, want)) in scores.iter().zip(expected) {
            assert_eq!(*id, want_id);
            assert!((score - want).abs() < 1e-9, "{id}: {score} vs {want}");
        }
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
