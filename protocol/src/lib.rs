//! The vocabulary kiln's controller and workers share: campaign configs,
//! decision points and decision sets, step requests and results, metrics and
//! their statistics, and the framing of messages on a byte stream.

pub mod breakdown;
pub mod bundle;
pub mod config;
pub mod decision;
pub mod decode;
pub mod features;
pub mod frame;
pub mod gpu_trace;
pub mod message;
pub mod metric;
pub mod quantity;
pub mod sexp;
pub mod stats;

pub use config::CampaignConfig;
pub use decision::{ContentHash, DecisionFile, DecisionPoint, DecisionSet, DecisionValue, SiteId};
pub use features::SiteFeatures;
pub use message::{
    Measurement, Request, Response, StepId, StepOutcome, StepRequest, StepResult, PROTOCOL_VERSION,
};
pub use metric::{Metric, MetricValue, Metrics};
pub use sexp::SexpError;
pub use stats::{Statistic, Summary};
