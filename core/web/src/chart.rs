//! The list page's chart: tasks created, completed, failed and cancelled per minute over the
//! last hour, drawn as an SVG the server renders into the page (no script, no library, no
//! inline style: presentation comes from the stylesheet through classes, as the page's
//! Content-Security-Policy asks), and swapped with the rest of the page when the store changes.

use mcp_tasks::admin::query::{ACTIVITY_MINUTES, Activity, MinuteCounts};

/// What the template draws.
pub(crate) struct Chart {
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) left: u32,
    pub(crate) right: u32,
    pub(crate) top: u32,
    pub(crate) bottom: u32,
    /// The most of any series in one minute (the top of the scale; at least 1).
    pub(crate) peak: u64,
    /// Labels under the time axis: x and text.
    pub(crate) ticks: Vec<(u32, String)>,
    pub(crate) series: Vec<Series>,
}

/// One line of the chart.
pub(crate) struct Series {
    /// `created`, `completed`, `failed` or `cancelled` (also its class).
    pub(crate) name: &'static str,
    /// The hour's total.
    pub(crate) total: u64,
    /// The polyline's points, `x,y x,y ...`, oldest minute first.
    pub(crate) points: String,
}

/// Reads one series' count of a minute.
type Count = fn(&MinuteCounts) -> u64;

const WIDTH: u32 = 720;
const HEIGHT: u32 = 140;
const LEFT: u32 = 36;
const RIGHT: u32 = WIDTH - 8;
const TOP: u32 = 8;
const BOTTOM: u32 = HEIGHT - 18;

impl Chart {
    pub(crate) fn of(activity: &Activity) -> Self {
        let kinds: [(&'static str, Count); 4] = [
            ("created", |m| m.created),
            ("completed", |m| m.completed),
            ("failed", |m| m.failed),
            ("cancelled", |m| m.cancelled),
        ];
        let peak = activity.minutes.iter().flat_map(|m| kinds.iter().map(move |(_, f)| f(m))).max().unwrap_or(0).max(1);
        let step = f64::from(RIGHT - LEFT) / (ACTIVITY_MINUTES.max(2) - 1) as f64;
        let x = |i: usize| f64::from(LEFT) + step * i as f64;
        let series = kinds
            .iter()
            .map(|(name, f)| {
                let points: Vec<String> = activity
                    .minutes
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        let y = f64::from(BOTTOM) - f(m) as f64 / peak as f64 * f64::from(BOTTOM - TOP);
                        format!("{:.1},{y:.1}", x(i))
                    })
                    .collect();
                Series { name, total: activity.minutes.iter().map(f).sum(), points: points.join(" ") }
            })
            .collect();
        // Labels at the hour's start, its middle and now.
        let last = ACTIVITY_MINUTES - 1;
        let ticks = [(0, "−60 min"), (last / 2, "−30 min"), (last, "now")]
            .into_iter()
            .map(|(i, text)| (x(i).round() as u32, text.to_owned()))
            .collect();
        Self { width: WIDTH, height: HEIGHT, left: LEFT, right: RIGHT, top: TOP, bottom: BOTTOM, peak, ticks, series }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_series_has_a_point_a_minute_scaled_to_the_busiest_minute() {
        let mut minutes = vec![MinuteCounts::default(); ACTIVITY_MINUTES];
        minutes[0].created = 4;
        minutes[59].completed = 2;
        minutes[59].failed = 1;
        let chart = Chart::of(&Activity { first_minute_ms: 0, minutes });
        assert_eq!(chart.peak, 4);
        let created = &chart.series[0];
        assert_eq!((created.name, created.total), ("created", 4));
        let points: Vec<&str> = created.points.split(' ').collect();
        assert_eq!(points.len(), ACTIVITY_MINUTES);
        assert_eq!(points[0], format!("{LEFT}.0,{TOP}.0"), "the peak at the top, the first minute at the left");
        assert_eq!(points[59], format!("{RIGHT}.0,{BOTTOM}.0"));
        assert_eq!(
            chart.series[1].points.split(' ').next_back(),
            Some(format!("{RIGHT}.0,{}.0", BOTTOM - (BOTTOM - TOP) / 2).as_str())
        );
        assert_eq!(chart.series.iter().map(|s| s.total).collect::<Vec<_>>(), [4, 2, 1, 0]);
        // An empty hour still draws (flat lines on a scale of 1).
        let empty =
            Chart::of(&Activity { first_minute_ms: 0, minutes: vec![MinuteCounts::default(); ACTIVITY_MINUTES] });
        assert_eq!(empty.peak, 1);
    }
}
