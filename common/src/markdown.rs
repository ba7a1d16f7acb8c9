//! Markdown descriptions (`parser: "markdown"`): rendered to HTML that is
//! safe to put in a page, and reduced to readable text for what cannot
//! show HTML (pushes, chat messages).
//!
//! CommonMark is parsed by `pulldown-cmark` (the parser rustdoc and mdBook
//! use) and its HTML is cleaned by `ammonia` (an html5ever-based allow-list
//! sanitiser): raw HTML written in the markdown is shown as the text it
//! is, never as markup, and the sanitiser then keeps only the tags
//! markdown itself makes, links to http(s) and mailto only, each with
//! `rel="noopener noreferrer"`. Images become links: a description must
//! not make every reader's browser fetch a stranger's URL.

use std::{collections::HashSet, sync::LazyLock};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html};

/// The extensions beyond CommonMark that chat and issue trackers taught
/// users to expect: ~~strikethrough~~ and tables.
fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES
}

/// The markdown's events with raw HTML turned into text, and images into
/// links to them (their alt text as the link's text).
fn parsed(markdown: &str) -> impl Iterator<Item = Event<'_>> {
    Parser::new_ext(markdown, options()).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    })
}

/// The tags the sanitiser keeps: those CommonMark and its two extensions
/// produce, but images.
const TAGS: &[&str] = &[
    "a",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
];

static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::empty();
    builder
        .tags(TAGS.iter().copied().collect())
        .tag_attributes(
            [
                ("a", ["href", "title"].into_iter().collect()),
                ("ol", ["start"].into_iter().collect()),
                ("td", ["align"].into_iter().collect()),
                ("th", ["align"].into_iter().collect()),
            ]
            .into_iter()
            .collect(),
        )
        .url_schemes(
            ["http", "https", "mailto"]
                .into_iter()
                .collect::<HashSet<_>>(),
        )
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer"))
        .strip_comments(true);
    builder
});

/// `markdown` as sanitised HTML: safe to insert in a page as it is.
pub fn to_html(markdown: &str) -> String {
    let mut unsafe_html = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut unsafe_html, parsed(markdown));
    CLEANER.clean(&unsafe_html).to_string()
}

/// `markdown` as plain text a person reads easily: emphasis and code marks
/// dropped, a link as its text, list items on lines of their own with a
/// bullet, blocks separated by a line break, raw HTML as the text it is.
pub fn to_text(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    // The number of the next item of each open list (`None`: a bullet list).
    let mut lists: Vec<Option<u64>> = Vec::new();
    for event in parsed(markdown) {
        match event {
            Event::Text(text) | Event::Code(text) => out.push_str(&text),
            Event::SoftBreak => out.push(' '),
            Event::HardBreak | Event::Rule => out.push('\n'),
            Event::Start(Tag::List(first)) => {
                block_break(&mut out);
                lists.push(first);
            }
            Event::End(TagEnd::List(_)) => {
                lists.pop();
            }
            Event::Start(Tag::Item) => {
                block_break(&mut out);
                let depth = lists.len().saturating_sub(1);
                out.push_str(&"  ".repeat(depth));
                match lists.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str("• "),
                }
            }
            Event::Start(Tag::TableCell) => {
                if !out.ends_with('\n') && !out.is_empty() {
                    out.push_str(" | ");
                }
            }
            Event::TaskListMarker(done) => out.push_str(if done { "[x] " } else { "[ ] " }),
            Event::FootnoteReference(name) => out.push_str(&format!("[{name}]")),
            Event::Start(_) => {}
            Event::End(end) => {
                if is_block(&end) {
                    block_break(&mut out);
                }
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => out.push_str(&text),
            // `parsed` made raw HTML text already.
            Event::Html(_) | Event::InlineHtml(_) => {}
        }
    }
    out.trim().to_owned()
}

/// Whether the end of `tag` closes a block, which text continues after on
/// a line of its own.
fn is_block(tag: &TagEnd) -> bool {
    matches!(
        tag,
        TagEnd::Paragraph
            | TagEnd::Heading(_)
            | TagEnd::BlockQuote(_)
            | TagEnd::CodeBlock
            | TagEnd::Item
            | TagEnd::TableHead
            | TagEnd::TableRow
    )
}

/// Starts a new line unless the text is empty or already on one.
fn block_break(out: &mut String) {
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_renders_its_own_tags() {
        let html = to_html(
            "# Deploy\n\n**bold** _it_ ~~gone~~ `code`\n\n- one\n- two\n\n\
             [docs](https://example.com/docs \"Docs\")\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        );
        for part in [
            "<h1>Deploy</h1>",
            "<strong>bold</strong>",
            "<em>it</em>",
            "<del>gone</del>",
            "<code>code</code>",
            "<li>one</li>",
            "<td>1</td>",
            "href=\"https://example.com/docs\"",
            "rel=\"noopener noreferrer\"",
            "title=\"Docs\"",
        ] {
            assert!(html.contains(part), "{part} missing from {html}");
        }
    }

    /// What an attacker writes in a description comes out as text or not
    /// at all: no element, attribute or URL that runs anything.
    #[test]
    fn hostile_markdown_is_inert() {
        let hostile = "<script>alert(1)</script>\n\n\
            <img src=x onerror=alert(2)>\n\n\
            [click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=) \
            [rel](/admin) <a href=\"https://ok.example\" onclick=\"alert(4)\">a</a>\n\n\
            ![pixel](https://tracker.example/p.gif)\n\n\
            <iframe src=\"https://evil.example\"></iframe> <style>*{}</style>\n\n\
            [vb](vbscript:msgbox) [m](mailto:ops@example.com)";
        let html = to_html(hostile);
        // Every tag in the output, as markup (escaped text is not one).
        let tags: Vec<String> = html
            .split('<')
            .skip(1)
            .map(|rest| rest.split('>').next().unwrap_or_default().to_lowercase())
            .collect();
        for tag in &tags {
            let name = tag
                .trim_start_matches('/')
                .split(' ')
                .next()
                .unwrap_or_default();
            assert!(["a", "p"].contains(&name), "<{tag}> in {html}");
            for banned in [
                "on",
                "src=",
                "style=",
                "javascript",
                "data:",
                "vbscript",
                "/admin",
            ] {
                let attributes = tag.split(' ').skip(1);
                assert!(
                    !attributes
                        .clone()
                        .any(|a| a.starts_with(banned) || a.contains(&format!("=\"{banned}"))),
                    "{banned} in <{tag}>"
                );
            }
        }
        // The raw HTML is shown as the text it is.
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        // The image is a link a reader may choose to follow.
        assert!(
            html.contains("href=\"https://tracker.example/p.gif\""),
            "{html}"
        );
        assert!(html.contains("href=\"mailto:ops@example.com\""), "{html}");
    }

    #[test]
    fn text_keeps_the_words_and_drops_the_marks() {
        let text = to_text(
            "# Deploy *42*\n\nShipped **fast**, see [the log](https://ci.example/42).\n\n\
             1. build\n2. test\n\n- eu\n- us\n\n`cargo` <b>raw</b>",
        );
        assert_eq!(
            text,
            "Deploy 42\nShipped fast, see the log.\n1. build\n2. test\n• eu\n• us\n\
             cargo <b>raw</b>"
        );
    }

    #[test]
    fn plain_text_stays_as_it_is() {
        assert_eq!(
            to_text("Card declined for order 1042"),
            "Card declined for order 1042"
        );
    }
}
