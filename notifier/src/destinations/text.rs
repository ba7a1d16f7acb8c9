//! Text within a service's limits: user strings escaped for the target's
//! markup and cut (ending in `…`) to the length the service counts, never
//! inside an escape. Each sender says how its service measures
//! ([`Measure`]), how a character is escaped ([`Escape`]), and whether the
//! limit is on the text as sent or as shown ([`Counted`]).

/// How a service measures text against its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Measure {
    /// UTF-16 code units: what Telegram counts, and never fewer than the
    /// characters (code points) another service may count instead, so a
    /// limit in either is kept. An emoji outside the BMP counts 2.
    Utf16,
    /// UTF-8 bytes (ntfy's message limit).
    Bytes,
}

impl Measure {
    pub(crate) fn of_char(self, c: char) -> usize {
        match self {
            Self::Utf16 => c.len_utf16(),
            Self::Bytes => c.len_utf8(),
        }
    }

    pub(crate) fn of(self, s: &str) -> usize {
        s.chars().map(|c| self.of_char(c)).sum()
    }
}

/// Whether a limit is on the text as sent, escapes included (Slack,
/// Discord), or as the reader sees it once the service has parsed its
/// markup (Telegram counts after entities are decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Sent,
    Shown,
}

/// How one character is written in a markup: `None` when it stands for
/// itself.
pub(crate) type Escape = fn(char) -> Option<&'static str>;

/// No markup: every character stands for itself.
pub(crate) fn plain(_: char) -> Option<&'static str> {
    None
}

/// HTML text and attribute values (`&`, `<`, `>`, `"`, `'`); the entities
/// Telegram's HTML mode knows are among them, except `&#39;`, so Telegram
/// uses [`telegram_html`].
pub(crate) fn html(c: char) -> Option<&'static str> {
    match c {
        '\'' => Some("&#39;"),
        _ => telegram_html(c),
    }
}

/// Telegram's HTML parse mode: the four named entities it decodes.
pub(crate) fn telegram_html(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        _ => None,
    }
}

/// What the shortened text ends with.
pub(crate) const ELLIPSIS: char = '…';

/// Text fitted to a limit, and its size as the limit counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fitted {
    pub text: String,
    pub size: usize,
}

/// `text` escaped with `escape`, at most `max` long as `measure` and
/// `counted` count it: whole when it fits, else cut after the last whole
/// character (and its escape) that leaves room for `…`. Trailing
/// whitespace before the `…` goes too.
pub(crate) fn fit(
    text: &str,
    max: usize,
    measure: Measure,
    counted: Counted,
    escape: Escape,
) -> Fitted {
    let cost = |c: char| match (counted, escape(c)) {
        (Counted::Sent, Some(escaped)) => measure.of(escaped),
        _ => measure.of_char(c),
    };
    let push = |out: &mut String, c: char| match escape(c) {
        Some(escaped) => out.push_str(escaped),
        None => out.push(c),
    };
    let total: usize = text.chars().map(cost).sum();
    let mut out = String::with_capacity(text.len().min(max.saturating_mul(4)) + 8);
    if total <= max {
        text.chars().for_each(|c| push(&mut out, c));
        return Fitted {
            text: out,
            size: total,
        };
    }
    let ellipsis = measure.of_char(ELLIPSIS);
    let Some(room) = max.checked_sub(ellipsis) else {
        return Fitted {
            text: String::new(),
            size: 0,
        };
    };
    let mut kept = Vec::new();
    let mut size = 0;
    for c in text.chars() {
        let k = cost(c);
        if size + k > room {
            break;
        }
        size += k;
        kept.push(c);
    }
    while kept.last().is_some_and(|c| c.is_whitespace()) {
        if let Some(c) = kept.pop() {
            size -= cost(c);
        }
    }
    kept.into_iter().for_each(|c| push(&mut out, c));
    out.push(ELLIPSIS);
    Fitted {
        text: out,
        size: size + ellipsis,
    }
}

/// Control characters (a newline in a title, a NUL) as spaces, for text
/// that must stay on one line: a subject, a heading, a reason.
pub(crate) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What a service said, fit for a reason: its first line, without
/// control characters, at most 200 characters.
pub(crate) fn snippet(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default();
    fit(&one_line(line), 200, Measure::Utf16, Counted::Sent, plain).text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_fits_is_only_escaped() {
        let f = fit("a<b", 10, Measure::Utf16, Counted::Sent, html);
        assert_eq!(
            f,
            Fitted {
                text: "a&lt;b".into(),
                size: 6
            }
        );
        let shown = fit("a<b", 3, Measure::Utf16, Counted::Shown, html);
        assert_eq!(shown.text, "a&lt;b");
        assert_eq!(shown.size, 3);
    }

    #[test]
    fn a_cut_never_splits_an_escape_or_a_character() {
        let f = fit("ab<<<<", 8, Measure::Utf16, Counted::Sent, html);
        // "ab&lt;" is 6, and `…` makes 7; a second "&lt;" would not fit.
        assert_eq!(f.text, "ab&lt;…");
        assert_eq!(f.size, 7);
        let bytes = fit("ééé", 5, Measure::Bytes, Counted::Sent, plain);
        // `…` is 3 bytes: one é (2) fits before it.
        assert_eq!(bytes.text, "é…");
        assert_eq!(bytes.size, 5);
        let emoji = fit("😀😀😀", 4, Measure::Utf16, Counted::Sent, plain);
        assert_eq!(emoji.text, "😀…");
        assert_eq!(emoji.size, 3);
    }

    #[test]
    fn whitespace_before_the_ellipsis_goes() {
        assert_eq!(
            fit("one two three", 5, Measure::Utf16, Counted::Sent, plain).text,
            "one…"
        );
        assert_eq!(fit("abc", 0, Measure::Utf16, Counted::Sent, plain).text, "");
    }

    #[test]
    fn a_snippet_is_one_short_line() {
        assert_eq!(snippet("  no_service\nmore"), "no_service");
        assert_eq!(snippet("a\tb"), "a b");
        assert!(snippet(&"x".repeat(1000)).chars().count() <= 200);
    }
}
