//! Markdown-aware chunking for the memory index: a file is split at its headings, and a
//! section longer than a window is cut into overlapping windows of whole lines. Every chunk
//! keeps its line range, so a search hit can point at `path:start-end`.

/// About 400 tokens at four characters a token.
const WINDOW_CHARS: usize = 1_600;
/// About 80 tokens carried over from one window into the next, so that a fact cut by a
/// window boundary is still whole in one of them.
const OVERLAP_CHARS: usize = 320;

/// A piece of a file as indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    /// The headings above the chunk, outermost first (`Projects > nanocrab`).
    pub heading: String,
    pub text: String,
}

/// Splits markdown (or plain text, which has no headings) into chunks. Blank sections, and
/// sections that are only their heading, are left out; `#` lines inside fenced code blocks
/// are not headings.
pub fn chunk_markdown(text: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut section: Vec<(usize, &str)> = Vec::new();
    let mut section_heading = String::new();
    let mut in_fence = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        let level = (!in_fence).then(|| heading_level(line)).flatten();
        if let Some(level) = level {
            window(&section, &section_heading, &mut chunks);
            section.clear();
            headings.retain(|(l, _)| *l < level);
            headings.push((level, line.trim_start_matches('#').trim().to_owned()));
            section_heading = headings
                .iter()
                .map(|(_, h)| h.as_str())
                .collect::<Vec<_>>()
                .join(" > ");
        }
        section.push((index + 1, line));
    }
    window(&section, &section_heading, &mut chunks);
    chunks
}

/// `## Title` is level 2; `#hashtag` and `#` alone are not headings.
fn heading_level(line: &str) -> Option<usize> {
    let level = line.bytes().take_while(|b| *b == b'#').count();
    let rest = &line[level..];
    ((1..=6).contains(&level) && rest.starts_with(' ') && !rest.trim().is_empty()).then_some(level)
}

/// Cuts one section into windows of whole lines, each at most [`WINDOW_CHARS`] unless a single
/// line is longer, each next one starting [`OVERLAP_CHARS`] before the previous one ended.
fn window(lines: &[(usize, &str)], heading: &str, chunks: &mut Vec<Chunk>) {
    let size = |range: &[(usize, &str)]| range.iter().map(|(_, l)| l.len() + 1).sum::<usize>();
    let mut start = 0;
    while start < lines.len() {
        let mut end = start + 1;
        while end < lines.len() && size(&lines[start..=end]) <= WINDOW_CHARS {
            end += 1;
        }
        // Blank lines at either end are not part of what a hit points at.
        let piece = &lines[start..end];
        let first = piece.iter().position(|(_, l)| !l.trim().is_empty());
        let last = piece.iter().rposition(|(_, l)| !l.trim().is_empty());
        // A heading with nothing under it (the templates' `## Preferences` waiting to be
        // filled in) says nothing a search could want; its words stay findable in the
        // headings of the sections below it.
        let only_heading = !heading.is_empty() && start == 0 && first == Some(0) && last == first;
        if let (Some(first), Some(last), false) = (first, last, only_heading) {
            let piece = &piece[first..=last];
            chunks.push(Chunk {
                start_line: piece[0].0,
                end_line: piece[piece.len() - 1].0,
                heading: heading.to_owned(),
                text: piece.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n"),
            });
        }
        if end == lines.len() {
            break;
        }
        // Step back over whole lines until the overlap is covered, but always move forward.
        let mut next = end;
        while next > start + 1 && size(&lines[next - 1..end]) <= OVERLAP_CHARS {
            next -= 1;
        }
        start = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn headings_start_sections_and_keep_their_path() {
        let text = "intro line\n\n# Projects\n## nanocrab\nRust assistant.\n```\n# not a heading\n```\n## garden\n#tag is text\nTomatoes.\n# People\nAda.";
        let chunks = chunk_markdown(text);
        let summary: Vec<(usize, usize, &str)> = chunks
            .iter()
            .map(|c| (c.start_line, c.end_line, c.heading.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (1, 1, ""),
                (4, 8, "Projects > nanocrab"),
                (9, 11, "Projects > garden"),
                (12, 13, "People"),
            ]
        );
        assert_eq!(
            chunks[1].text,
            "## nanocrab\nRust assistant.\n```\n# not a heading\n```"
        );
    }

    #[test]
    fn headings_with_nothing_under_them_are_not_chunks() {
        let template = "# Long-term memory\n\n## About the user\n\n## Preferences\n- Tea, no sugar.\n\n## Projects\n   \n## Decisions and facts\n";
        let chunks = chunk_markdown(template);
        assert_eq!(
            chunks,
            vec![Chunk {
                start_line: 5,
                end_line: 6,
                heading: "Long-term memory > Preferences".into(),
                text: "## Preferences\n- Tea, no sugar.".into(),
            }]
        );
    }

    #[test]
    fn a_long_section_becomes_overlapping_windows_of_whole_lines() {
        let lines: Vec<String> = (1..=100)
            .map(|i| format!("line {i:03} {}", "x".repeat(50)))
            .collect();
        let chunks = chunk_markdown(&lines.join("\n"));
        assert!(chunks.len() > 1);
        for pair in chunks.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(a.text.len() <= WINDOW_CHARS, "{}", a.text.len());
            assert!(b.start_line > a.start_line, "always moves forward");
            assert!(b.start_line <= a.end_line, "windows overlap");
            let overlap: usize = (b.start_line..=a.end_line)
                .map(|n| lines[n - 1].len() + 1)
                .sum();
            assert!(overlap <= OVERLAP_CHARS, "{overlap}");
        }
        assert_eq!(chunks.last().unwrap().end_line, 100);
        assert_eq!(chunks[0].start_line, 1);
    }

    #[test]
    fn blank_text_has_no_chunks_and_one_huge_line_is_one_chunk() {
        assert_eq!(chunk_markdown("\n\n   \n"), vec![]);
        let huge = "y".repeat(5_000);
        let chunks = chunk_markdown(&huge);
        assert_eq!(chunks.len(), 1);
        assert_eq!((chunks[0].start_line, chunks[0].end_line), (1, 1));
    }
}
