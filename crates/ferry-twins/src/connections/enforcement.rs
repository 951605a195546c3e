//! A source's `enforcement` (Ditto's `SignalEnforcementFilter`): the
//! `input`, read from the message (`{{ header:device_id }}`), must equal
//! one of the `filters` filled in with the command's entity id
//! (`{{ entity:id }}`), or the command is not executed. It holds a device
//! that writes into a shared topic to its own thing.

use super::placeholder::{Holds, Received, SourceTemplate};
use crate::error::DittoError;
use serde_json::Value;

/// Filters one enforcement may list: each is compared per message.
const MAX_FILTERS: usize = 16;

#[derive(Debug)]
pub struct Enforcement {
    input: SourceTemplate,
    filters: Vec<SourceTemplate>,
}

impl Enforcement {
    pub fn parse(json: &Value) -> Result<Enforcement, DittoError> {
        let invalid = |why: &str| DittoError::connection_invalid(format!("The enforcement {why}."));
        let Value::Object(object) = json else { return Err(invalid("must be a JSON object")) };
        let input = object
            .get("input")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("needs an 'input', e.g. '{{ header:device_id }}'"))?;
        let filters = match object.get("filters") {
            Some(Value::Array(filters)) if !filters.is_empty() && filters.len() <= MAX_FILTERS => {
                filters
            }
            _ => {
                return Err(invalid(&format!(
                    "needs 1 to {MAX_FILTERS} 'filters', e.g. ['{{{{ entity:id }}}}']"
                )))
            }
        };
        let filters = filters
            .iter()
            .map(|filter| {
                let filter = filter.as_str().ok_or_else(|| invalid("filters are strings"))?;
                SourceTemplate::parse(filter, Holds::Entity, "enforcement filter")
            })
            .collect::<Result<_, _>>()?;
        Ok(Enforcement {
            input: SourceTemplate::parse(input, Holds::Headers, "enforcement input")?,
            filters,
        })
    }

    /// Whether a command for `entity_id` may run, given what its message
    /// carries: Ditto's
    /// `connectivity:connection.id.enforcement.failed` (400) if not,
    /// naming the input as Ditto's message does.
    pub fn check(&self, received: Received<'_>, entity_id: Option<&str>) -> Result<(), DittoError> {
        let input = self.input.with_received(received);
        let matched = match (&input, entity_id) {
            (Some(input), Some(entity_id)) => self
                .filters
                .iter()
                .any(|filter| filter.with_entity(entity_id).as_deref() == Some(input.as_str())),
            _ => false,
        };
        if matched {
            Ok(())
        } else {
            Err(crate::protocol::id_enforcement_failed(input.as_deref().unwrap_or_default()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map};

    fn seed() -> Enforcement {
        // The Ditto benchmark's Kafka source (../seeds/ditto-benchmark.txt).
        Enforcement::parse(
            &json!({"input": "{{ header:device_id }}", "filters": ["{{ entity:id }}"]}),
        )
        .unwrap()
    }

    fn headers(device_id: &str) -> Map<String, Value> {
        let mut headers = Map::new();
        headers.insert("device_id".into(), device_id.into());
        headers
    }

    fn received(headers: &Map<String, Value>) -> Received<'_> {
        Received { headers, address: None }
    }

    #[test]
    fn the_device_may_command_its_own_thing_only() {
        let own = "org.eclipse.ditto:test-thing-1";
        assert!(seed().check(received(&headers(own)), Some(own)).is_ok());
        let other = headers("org.eclipse.ditto:test-thing-2");
        let error = seed().check(received(&other), Some(own)).unwrap_err();
        assert_eq!(
            (error.status, error.error),
            (400, "connectivity:connection.id.enforcement.failed")
        );
        assert!(error.message.contains("test-thing-2"), "{}", error.message);
        assert!(seed().check(received(&Map::new()), Some(own)).is_err(), "no device_id header");
        assert!(seed().check(received(&headers(own)), None).is_err(), "without an entity");
    }

    #[test]
    fn an_mqtt_device_may_publish_on_its_own_topic_only() {
        let enforcement = Enforcement::parse(
            &json!({"input": "{{ source:address }}", "filters": ["telemetry/{{ thing:id }}"]}),
        )
        .unwrap();
        let headers = Map::new();
        let on = |address| Received { headers: &headers, address: Some(address) };
        let own = "org.acme:lamp-1";
        assert!(enforcement.check(on("telemetry/org.acme:lamp-1"), Some(own)).is_ok());
        assert!(enforcement.check(on("telemetry/org.acme:lamp-2"), Some(own)).is_err());
    }

    #[test]
    fn an_enforcement_without_input_or_filters_is_refused() {
        for bad in [
            json!({"filters": ["{{ entity:id }}"]}),
            json!({"input": "x", "filters": []}),
            json!("x"),
        ] {
            assert!(Enforcement::parse(&bad).is_err(), "{bad}");
        }
    }
}
