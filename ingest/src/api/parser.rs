//! An event's `parser` as the API takes and shows it, and its store twin.

use common::store::Parser;
use poem_openapi::Enum;

/// How the description is written: `text` (the default) is shown as it
/// is; `markdown` (CommonMark, with tables and ~~strikethrough~~) is shown
/// rendered and sanitised on the feed (`descriptionHtml`), and reduced to
/// readable text in pushes and chat messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, serde::Serialize)]
#[oai(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum EventParser {
    Text,
    Markdown,
}

impl From<EventParser> for Parser {
    fn from(p: EventParser) -> Self {
        match p {
            EventParser::Text => Self::Text,
            EventParser::Markdown => Self::Markdown,
        }
    }
}

impl From<Parser> for EventParser {
    fn from(p: Parser) -> Self {
        match p {
            Parser::Text => Self::Text,
            Parser::Markdown => Self::Markdown,
        }
    }
}
