//! A URL's query and a form's body (`application/x-www-form-urlencoded`), and the list filters
//! they carry: every filter and page lives in the URL, so a view can be shared and reloaded.

use mcp_tasks::admin::query::{Cursor, TaskQuery};
use mcp_tasks::protocol::TaskStatus;
use mcp_tasks::protocol::time::{format_ms, parse_ms};

/// Decoded name-value pairs, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Parses `a=1&b=2` (a query without its `?`, or a form body).
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        Self(form_urlencoded::parse(bytes).into_owned().collect())
    }

    /// The first value of `name`, if set and not empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str())
    }

    /// Every non-empty value of `name`.
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str())
    }
}

/// Percent-encodes a value for a URL's query or a cookie.
pub(crate) fn encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Decodes a percent-encoded value.
pub(crate) fn decode(value: &str) -> String {
    form_urlencoded::parse(format!("v={value}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
}

/// Reads a time a filter gives: RFC 3339, or a form's `YYYY-MM-DDTHH:MM` or `YYYY-MM-DD`
/// (taken as UTC).
pub(crate) fn parse_time(text: &str) -> Option<u64> {
    parse_ms(text).or_else(|| parse_ms(&format!("{text}:00Z"))).or_else(|| parse_ms(&format!("{text}T00:00:00Z")))
}

/// The list's filters as the URL carries them, kept as text to show them back in the form.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filters {
    pub(crate) statuses: Vec<TaskStatus>,
    pub(crate) tool: String,
    pub(crate) principal: String,
    pub(crate) text: String,
    pub(crate) id: String,
    pub(crate) created_from: String,
    pub(crate) created_until: String,
    pub(crate) updated_from: String,
    pub(crate) updated_until: String,
    pub(crate) expiring: bool,
    pub(crate) after: Option<Cursor>,
    pub(crate) limit: usize,
    /// What was refused (an unknown status, a time that does not parse), shown on the page.
    pub(crate) problems: Vec<String>,
}

/// The page size when the URL names none.
pub(crate) const DEFAULT_LIMIT: usize = 50;

impl Filters {
    pub(crate) fn from_params(params: &Params) -> Self {
        let mut filters = Self { limit: DEFAULT_LIMIT, ..Self::default() };
        for status in params.all("status") {
            match serde_json::from_value::<TaskStatus>(serde_json::Value::String(status.to_owned())) {
                Ok(status) if !filters.statuses.contains(&status) => filters.statuses.push(status),
                Ok(_) => {}
                Err(_) => filters.problems.push(format!("unknown status {status:?}")),
            }
        }
        let text = |name: &str| params.get(name).unwrap_or_default().trim().to_owned();
        filters.tool = text("tool");
        filters.principal = text("principal");
        filters.text = text("q");
        filters.id = text("id");
        filters.created_from = text("created_from");
        filters.created_until = text("created_until");
        filters.updated_from = text("updated_from");
        filters.updated_until = text("updated_until");
        filters.expiring = params.get("expiring").is_some();
        if let Some(after) = params.get("after") {
            match Cursor::decode(after) {
                Some(cursor) => filters.after = Some(cursor),
                None => filters.problems.push(format!("unreadable page position {after:?}")),
            }
        }
        if let Some(limit) = params.get("limit") {
            match limit.parse::<usize>() {
                Ok(n) if (1..=mcp_tasks::admin::query::MAX_PAGE).contains(&n) => filters.limit = n,
                _ => filters.problems.push(format!("page size {limit:?} is not 1 to 500")),
            }
        }
        for (name, value) in [
            ("created from", &filters.created_from),
            ("created until", &filters.created_until),
            ("updated from", &filters.updated_from),
            ("updated until", &filters.updated_until),
        ] {
            if !value.is_empty() && parse_time(value).is_none() {
                filters.problems.push(format!("{name}: {value:?} is not a time (2026-12-05 or 2026-12-05T10:30)"));
            }
        }
        filters
    }

    /// The store query: the viewer's principals always apply.
    pub(crate) fn query(&self, principals: Option<Vec<String>>, now_ms: u64) -> TaskQuery {
        let some = |s: &String| (!s.is_empty()).then(|| s.clone());
        let time = |s: &String| parse_time(s);
        TaskQuery {
            statuses: self.statuses.clone(),
            tool: some(&self.tool),
            principal: some(&self.principal),
            principals,
            created_from_ms: time(&self.created_from),
            created_until_ms: time(&self.created_until),
            updated_from_ms: time(&self.updated_from),
            updated_until_ms: time(&self.updated_until),
            id_prefix: some(&self.id),
            text: some(&self.text),
            expiring_before_ms: self.expiring.then(|| now_ms.saturating_add(3_600_000)),
            after: self.after.clone(),
            limit: self.limit,
        }
    }

    /// The query string of these filters (without the page position), for links.
    pub(crate) fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = self.statuses.iter().map(|s| ("status", s.as_str().to_owned())).collect();
        for (name, value) in [
            ("tool", &self.tool),
            ("principal", &self.principal),
            ("q", &self.text),
            ("id", &self.id),
            ("created_from", &self.created_from),
            ("created_until", &self.created_until),
            ("updated_from", &self.updated_from),
            ("updated_until", &self.updated_until),
        ] {
            if !value.is_empty() {
                pairs.push((name, value.clone()));
            }
        }
        if self.expiring {
            pairs.push(("expiring", "1".into()));
        }
        if self.limit != DEFAULT_LIMIT {
            pairs.push(("limit", self.limit.to_string()));
        }
        form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
    }

    /// True when any filter is set (the page position aside).
    pub(crate) fn any(&self) -> bool {
        let mut plain = self.clone();
        plain.after = None;
        plain.problems.clear();
        !plain.to_query().is_empty()
    }
}

/// A time for a page: RFC 3339 to the second, UTC, saying so.
pub(crate) fn show_time(ms: u64) -> String {
    let full = format_ms(ms);
    format!("{} {} UTC", &full[..10], &full[11..19])
}

/// A time a page shows in a `<time>` element: its text in UTC, and the instant for the page's
/// script, which shows it in the browser's zone when the operator asks.
#[derive(Clone, Debug)]
pub(crate) struct When {
    /// RFC 3339, for `datetime`.
    pub(crate) iso: String,
    /// `2026-12-05 10:30:00 UTC`.
    pub(crate) text: String,
}

impl When {
    pub(crate) fn at(ms: u64) -> Self {
        Self { iso: format_ms(ms), text: show_time(ms) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_round_trip_through_the_url_and_name_what_they_refuse() {
        let params = Params::parse(
            b"status=working&status=failed&status=bogus&tool=a+b&q=50%25&created_from=2026-12-05&limit=20&after=17.x",
        );
        let filters = Filters::from_params(&params);
        assert_eq!(filters.statuses, [TaskStatus::Working, TaskStatus::Failed]);
        assert_eq!(filters.tool, "a b");
        assert_eq!(filters.text, "50%");
        assert_eq!(filters.problems, ["unknown status \"bogus\""]);
        let again = Filters::from_params(&Params::parse(filters.to_query().as_bytes()));
        assert_eq!(again.to_query(), filters.to_query());
        let query = filters.query(Some(vec!["p".into()]), 0);
        assert_eq!(query.created_from_ms, parse_ms("2026-12-05T00:00:00Z"));
        assert_eq!(query.after, Some(Cursor { updated_ms: 17, id: "x".into() }));
        assert_eq!(query.principals, Some(vec!["p".to_owned()]));
        assert_eq!(parse_time("2026-12-05T10:30"), parse_ms("2026-12-05T10:30:00Z"));
        assert!(Filters::from_params(&Params::parse(b"limit=0")).problems[0].contains("page size"));
        assert_eq!(decode(&encode("a b;c=d")), "a b;c=d");
    }
}
