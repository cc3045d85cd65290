//! [`StepResult`] read from its flat JSON without serde's `flatten`, which buffers
//! every field of the map before reading the flattened one: reading a stored step
//! took twice as long as reading its measurement (a pass over ten million steps,
//! minutes). Here the result's own fields are taken as they come, and every other
//! key is handed on to [`Measurement`]'s derived reader.

use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{BuildRecord, Measurement, StepId, StepResult};

impl<'de> Deserialize<'de> for StepResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ResultVisitor)
    }
}

/// The fields of a [`StepResult`] besides its measurement, as read so far.
#[derive(Default)]
struct Own {
    id: Option<StepId>,
    build: Option<Option<BuildRecord>>,
    started_ms: Option<u64>,
    finished_ms: Option<u64>,
}

struct ResultVisitor;

impl<'de> Visitor<'de> for ResultVisitor {
    type Value = StepResult;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a step result")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StepResult, A::Error> {
        let mut own = Own::default();
        let measurement =
            Measurement::deserialize(MapAccessDeserializer::new(Split { map, own: &mut own }))?;
        let missing = de::Error::missing_field;
        Ok(StepResult {
            id: own.id.ok_or_else(|| missing("id"))?,
            measurement,
            build: own.build.unwrap_or(None),
            started_ms: own.started_ms.ok_or_else(|| missing("started_ms"))?,
            finished_ms: own.finished_ms.ok_or_else(|| missing("finished_ms"))?,
        })
    }
}

/// The result's map as the measurement sees it: the result's own keys taken out.
struct Split<'a, A> {
    map: A,
    own: &'a mut Own,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Split<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            match key.as_str() {
                "id" => self.own.id = Some(self.map.next_value()?),
                "build" => self.own.build = Some(self.map.next_value()?),
                "started_ms" => self.own.started_ms = Some(self.map.next_value()?),
                "finished_ms" => self.own.finished_ms = Some(self.map.next_value()?),
                _ => {
                    let key: StringDeserializer<A::Error> = key.into_deserializer();
                    return seed.deserialize(key).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::StepOutcome;
    use super::*;

    #[test]
    fn a_result_reads_back_whatever_the_order_of_its_keys() {
        let mut result = StepResult::new(StepId(7), StepOutcome::Ok);
        result.measurement.target_met = true;
        let json = serde_json::to_string(&result).unwrap();
        assert_eq!(serde_json::from_str::<StepResult>(&json).unwrap(), result);
        // Sorted (build, finished_ms, id, outcome, runs, started_ms, …): the result's own
        // keys between the measurement's.
        let sorted: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&json).unwrap();
        let sorted = serde_json::to_string(&sorted).unwrap();
        assert_eq!(serde_json::from_str::<StepResult>(&sorted).unwrap(), result);
    }

    #[test]
    fn a_result_without_a_build_has_none_and_without_an_id_is_refused() {
        let result = StepResult::new(StepId(7), StepOutcome::Ok);
        let mut value = serde_json::to_value(&result).unwrap();
        value.as_object_mut().unwrap().remove("build");
        assert_eq!(
            serde_json::from_value::<StepResult>(value.clone()).unwrap(),
            result
        );
        value.as_object_mut().unwrap().remove("id");
        let refused = serde_json::from_value::<StepResult>(value).unwrap_err();
        assert!(
            refused.to_string().contains("missing field `id`"),
            "{refused}"
        );
    }
}
