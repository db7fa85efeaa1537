//! `log.format = "json"`: one JSON object per line, in the shape `tracing-subscriber`'s JSON
//! format writes (`timestamp`, `level`, `fields`, `target`), with a list kept a list: a
//! field listed in [`LISTS`] whose value reads as a JSON array is written as that array, so a
//! log pipeline can filter on one keyword instead of parsing a Rust debug string.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Fields logged as lists (`?keywords` of a `Vec<&str>`).
const LISTS: &[&str] = &["keywords"];

/// The JSON event format; see the module documentation.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let meta = event.metadata();
        let line = serde_json::json!({
            "timestamp": timestamp,
            "level": meta.level().as_str(),
            "fields": fields.0,
            "target": meta.target(),
        });
        writeln!(writer, "{line}")
    }
}

struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        let list = LISTS
            .contains(&field.name())
            .then(|| serde_json::from_str::<Value>(&text).ok())
            .flatten()
            .filter(Value::is_array);
        self.0
            .insert(field.name().into(), list.unwrap_or(Value::String(text)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_list_of_keywords_is_a_json_array() {
        let lines = Lines::default();
        let out = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let keywords = vec!["type", "pattern"];
            tracing::info!(tool = "add", violations = 2u64, ?keywords, "tools/call");
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            line["fields"],
            serde_json::json!({"message": "tools/call", "tool": "add", "violations": 2,
                               "keywords": ["type", "pattern"]})
        );
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].as_str().is_some_and(|t| t.contains('T')));
    }
}
