//! Timestamps as the protocol carries them. Time is always passed in as Unix milliseconds;
//! nothing here reads a clock.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Formats Unix milliseconds as an ISO 8601 / RFC 3339 UTC timestamp with millisecond precision
/// (`2026-09-01T12:00:00.000Z`), the form `createdAt` and `lastUpdatedAt` use.
pub fn format_ms(unix_ms: u64) -> String {
    let nanos = i128::from(unix_ms) * 1_000_000;
    let dt = OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let (y, mo, d) = (dt.year(), u8::from(dt.month()), dt.day());
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", dt.hour(), dt.minute(), dt.second(), dt.millisecond())
}

/// Parses an RFC 3339 timestamp into Unix milliseconds; `None` when it is not RFC 3339.
pub fn parse_ms(text: &str) -> Option<u64> {
    let dt = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    u64::try_from(dt.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_milliseconds() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_788_264_000_123), "2026-09-01T12:00:00.123Z");
        assert_eq!(parse_ms("2026-09-01T12:00:00.123Z"), Some(1_788_264_000_123));
        assert_eq!(parse_ms("not a time"), None);
    }
}
