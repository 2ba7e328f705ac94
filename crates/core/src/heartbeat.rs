//! The heartbeat's words: whether `HEARTBEAT.md` holds a task, what the model is asked on a
//! tick, and what of its reply reaches the user. The gateway schedules the ticks.
//!
//! A tick costs nothing while the file holds no task: the check is plain text, so an empty
//! list (the template `onboard` writes) never reaches a model.

/// The reply that says "nothing needs the user's attention"; alone or at either end of a
/// reply it is taken off, and a reply left empty is not sent.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// The session every heartbeat turn of agent `id` runs in, apart from the user's chats.
pub fn heartbeat_session(agent_id: &str) -> String {
    format!("agent:{agent_id}:heartbeat")
}

/// What the model is asked on a tick, `tasks` being the task text of `HEARTBEAT.md`.
pub fn heartbeat_prompt(tasks: &str) -> String {
    format!(
        "[Heartbeat: a scheduled check, not a message from the user.] Below is HEARTBEAT.md, \
         the user's list of standing tasks. Do what is due now. If nothing needs the user's \
         attention, reply exactly {HEARTBEAT_OK} and nothing else; otherwise reply only with \
         what the user should read, which is sent to their chat.\n\n<HEARTBEAT.md>\n{tasks}\n</HEARTBEAT.md>"
    )
}

/// The housekeeping model's instructions when it triages a tick before the agent's model is
/// asked.
pub const TRIAGE_PROMPT: &str = "You check a personal assistant's task list on a schedule. Given the current time and the list, answer YES if any task may need doing or checking now, NO if none does. Answer with one word: YES or NO.";

/// The triage question: the time and the tasks.
pub fn triage_question(now: &jiff::Zoned, tasks: &str) -> String {
    format!(
        "Current time: {}\n\nTasks:\n{tasks}",
        now.strftime("%Y-%m-%d %H:%M %A (%Z)")
    )
}

/// Whether the housekeeping model's triage answer lets the tick go on. Only a clear "no"
/// stops it: an unclear answer costs a turn, a wrong "no" would lose a task.
pub fn triage_says_due(answer: &str) -> bool {
    let word: String = answer
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect();
    !word.eq_ignore_ascii_case("no")
}

/// The guidance the template of earlier versions had as a paragraph (now a comment): in a
/// workspace made by one of them it is still there, and is no task either.
const EARLIER_GUIDANCE: &str = "Checked periodically by the gateway. List tasks to look at on each check, one per line, for\nexample \"- every morning: summarise today's calendar\". Leave the list empty to skip checks.";

/// The tasks of a `HEARTBEAT.md`: its text without HTML comments (nor the guidance earlier
/// templates wrote), trimmed, or `None` when no task is left — only blank lines, headings,
/// thematic breaks and list items with nothing in them (`-`, `* [ ]`, `1.`). A comment runs
/// to `-->`, or to the end when unclosed, as in HTML.
pub fn heartbeat_tasks(text: &str) -> Option<String> {
    let text = text.replace("\r\n", "\n").replace(EARLIER_GUIDANCE, "");
    let visible = without_comments(&text);
    says_something(&visible).then(|| visible.trim().to_owned())
}

/// The text without its HTML comments: a comment runs to `-->`, or to the end when unclosed.
/// Comments in a workspace file are notes for the person editing it, never sent to the model.
pub(crate) fn without_comments(text: &str) -> String {
    let mut visible = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        visible.push_str(&rest[..start]);
        rest = match rest[start + 4..].find("-->") {
            Some(end) => &rest[start + 4 + end + 3..],
            None => "",
        };
    }
    visible.push_str(rest);
    visible
}

/// Whether Markdown has more than structure: any line that is not blank, a heading, a
/// thematic break or an empty list item. A template nobody filled in says nothing.
pub(crate) fn says_something(markdown: &str) -> bool {
    markdown.lines().any(|line| !is_empty_line(line.trim()))
}

/// A line that asks nothing: blank, a heading, a thematic break or an empty list item.
fn is_empty_line(line: &str) -> bool {
    // A heading is one to six `#` and a space or nothing (`#hashtag` is text).
    let hashes = line.len() - line.trim_start_matches('#').len();
    if (1..=6).contains(&hashes)
        && line[hashes..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace)
    {
        return true;
    }
    if line.is_empty() {
        return true;
    }
    let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    if marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m)) {
        return true;
    }
    // A list marker: `-`, `*`, `+`, or digits with `.` or `)`.
    let item = if let Some(item) = line.strip_prefix(['-', '*', '+']) {
        item
    } else {
        let digits = line.trim_start_matches(|c: char| c.is_ascii_digit());
        match digits.strip_prefix(['.', ')']) {
            Some(item) if digits.len() < line.len() => item,
            Some(_) | None => return false,
        }
    };
    if !(item.is_empty() || item.starts_with(' ')) {
        return false;
    }
    let item = item.trim();
    // A checkbox with nothing after it, ticked or not.
    let item = ["[ ]", "[x]", "[X]"]
        .iter()
        .find_map(|box_| item.strip_prefix(box_))
        .unwrap_or(item);
    item.trim().is_empty()
}

/// What of the reply to a tick reaches the user: the reply with [`HEARTBEAT_OK`] taken off
/// its start or end (Markdown emphasis or code marks around it too), or `None` when nothing
/// is left to say.
pub fn heartbeat_reply(reply: &str) -> Option<String> {
    const MARKS: [char; 3] = ['*', '`', '_'];
    let mut text = reply.trim();
    let opened = text.trim_start_matches(MARKS);
    if let Some(rest) = opened.strip_prefix(HEARTBEAT_OK) {
        text = rest
            .trim_start_matches(MARKS)
            .trim_start_matches(['.', '!', ':', '-', ','])
            .trim_start();
    }
    let closed = text.trim_end_matches(MARKS).trim_end_matches(['.', '!']);
    if let Some(rest) = closed.trim_end_matches(MARKS).strip_suffix(HEARTBEAT_OK) {
        text = rest.trim_end_matches(MARKS).trim_end();
    }
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_file_with_only_headings_comments_and_empty_items_holds_no_task() {
        let empty = [
            "",
            "   \n\n",
            "# Heartbeat\n\n## Tasks\n",
            "<!-- add tasks below -->",
            "# Tasks\n<!--\n- water the plants\n-->\n- \n* [ ]\n+ [x]\n1.\n2)\n---\n* * *\n",
            "# Tasks\n<!-- never closed\n- water the plants\n",
            include_str!("../templates/HEARTBEAT.md"),
            // What `onboard` wrote before the guidance became a comment.
            "# Heartbeat\n\nChecked periodically by the gateway. List tasks to look at on each check, one per line, for\nexample \"- every morning: summarise today's calendar\". Leave the list empty to skip checks.\n\n## Tasks\n",
        ];
        let found: Vec<Option<String>> = empty.iter().map(|t| heartbeat_tasks(t)).collect();
        assert_eq!(found, vec![None; empty.len()]);
    }

    #[test]
    fn any_other_line_is_a_task_and_comments_are_left_out_of_it() {
        let cases = [
            ("- water the plants", "- water the plants"),
            (
                "Check the weather every morning.",
                "Check the weather every morning.",
            ),
            (
                "# Tasks\n<!-- guidance -->\n- [ ] call mum\n",
                "# Tasks\n\n- [ ] call mum",
            ),
            ("1. renew the passport", "1. renew the passport"),
            ("-not a list marker", "-not a list marker"),
            ("#hashtag is text", "#hashtag is text"),
            ("a <!-- b --> c", "a  c"),
            (
                "# Heartbeat\r\n\r\nChecked periodically by the gateway. List tasks to look at on each check, one per line, for\r\nexample \"- every morning: summarise today's calendar\". Leave the list empty to skip checks.\r\n\r\n## Tasks\r\n- call mum\r\n",
                "# Heartbeat\n\n\n\n## Tasks\n- call mum",
            ),
        ];
        let found: Vec<Option<String>> = cases.iter().map(|(t, _)| heartbeat_tasks(t)).collect();
        let wanted: Vec<Option<String>> = cases
            .iter()
            .map(|(_, w)| (!w.is_empty()).then(|| (*w).to_owned()))
            .collect();
        assert_eq!(found, wanted);
    }

    #[test]
    fn heartbeat_ok_alone_or_at_an_edge_is_taken_off() {
        let cases = [
            ("HEARTBEAT_OK", None),
            ("  **HEARTBEAT_OK**  \n", None),
            ("`HEARTBEAT_OK`.", None),
            ("HEARTBEAT_OK. Nothing due.", Some("Nothing due.")),
            (
                "Your passport expires next week. HEARTBEAT_OK",
                Some("Your passport expires next week."),
            ),
            ("HEARTBEAT_OK\nHEARTBEAT_OK", None),
            ("Water the plants.", Some("Water the plants.")),
            (
                "Say HEARTBEAT_OK in the middle and it stays.",
                Some("Say HEARTBEAT_OK in the middle and it stays."),
            ),
            ("", None),
        ];
        let found: Vec<Option<String>> = cases.iter().map(|(r, _)| heartbeat_reply(r)).collect();
        let wanted: Vec<Option<String>> = cases.iter().map(|(_, w)| w.map(str::to_owned)).collect();
        assert_eq!(found, wanted);
    }

    #[test]
    fn only_a_clear_no_stops_a_tick_at_triage() {
        let answers = [
            "NO",
            "no.",
            " **No**",
            "YES",
            "Yes, the call",
            "",
            "Nothing",
        ];
        let due: Vec<bool> = answers.iter().map(|a| triage_says_due(a)).collect();
        assert_eq!(due, [false, false, false, true, true, true, true]);
    }

    #[test]
    fn the_prompts_read_as_written() {
        let now: jiff::Zoned = "2026-11-22T14:05:00+01:00[Europe/Berlin]".parse().unwrap();
        insta::assert_snapshot!(format!(
            "{}\n\n---\n{TRIAGE_PROMPT}\n\n{}",
            heartbeat_prompt("- water the plants"),
            triage_question(&now, "- water the plants")
        ));
    }
}
