//! Reads a `/metrics` page so tests can assert on exact values.

use std::collections::BTreeMap;

/// Every sample of a scrape: `name{label="value",...}` → value, with the
/// labels in the order the page gives them.
#[derive(Debug)]
pub struct Scrape {
    samples: BTreeMap<String, f64>,
    text: String,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .filter_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                Some((series.to_owned(), value.parse().ok()?))
            })
            .collect();
        Self {
            samples,
            text: text.to_owned(),
        }
    }

    /// The value of one series, or 0 when the page does not have it (a
    /// labelled counter appears only once it was incremented). `labels` are
    /// matched as a set, whatever their order on the page.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(series, _)| Self::matches(series, name, labels))
            .map(|(_, v)| *v)
            .sum()
    }

    fn matches(series: &str, name: &str, labels: &[(&str, &str)]) -> bool {
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if series_name != name {
            return false;
        }
        let present: Vec<&str> = if series_labels.is_empty() {
            Vec::new()
        } else {
            series_labels
                .split("\",")
                .map(|l| l.trim_end_matches('"'))
                .collect()
        };
        present.len() == labels.len()
            && labels
                .iter()
                .all(|(k, v)| present.contains(&format!("{k}=\"{v}").as_str()))
    }

    /// Whether the page has the series at all (a zero counter included).
    pub fn has(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.samples
            .keys()
            .any(|series| Self::matches(series, name, labels))
    }

    /// The page as served, for failure messages.
    pub fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_labelled_and_plain_series() {
        let page =
            "# TYPE a counter\na_total 3\nb_total{route=\"/v1/x/{id}\",status=\"200\"} 2\n# EOF\n";
        let scrape = Scrape::parse(page);
        assert_eq!(scrape.value("a_total", &[]), 3.0);
        assert_eq!(
            scrape.value("b_total", &[("status", "200"), ("route", "/v1/x/{id}")]),
            2.0
        );
        assert_eq!(scrape.value("b_total", &[("status", "200")]), 0.0);
        assert_eq!(scrape.value("c_total", &[]), 0.0);
    }
}
