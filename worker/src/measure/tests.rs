use super::*;

fn run(warmup: bool, metrics: &[(Metric, MetricValue)]) -> RunRecord {
    RunRecord {
        index: 0,
        warmup,
        exit_code: Some(0),
        signal: None,
        metrics: metrics.iter().copied().collect(),
    }
}

#[test]
fn summaries_skip_warmups_and_unsupported() {
    let m = MetricValue::Measured;
    let runs = vec![
        run(true, &[(Metric::WallTime, m(100.0))]),
        run(
            false,
            &[
                (Metric::WallTime, m(1.0)),
                (Metric::Cycles, MetricValue::Unsupported),
            ],
        ),
        run(
            false,
            &[
                (Metric::WallTime, m(3.0)),
                (Metric::Cycles, MetricValue::Unsupported),
            ],
        ),
        run(false, &[(Metric::Instructions, m(7.0))]),
    ];
    let s = summarise(&runs);
    assert_eq!(s[&Metric::WallTime].n, 2);
    assert_eq!(s[&Metric::WallTime].max, 3.0);
    assert!(
        !s.contains_key(&Metric::Cycles),
        "unsupported must not be summarised as a number"
    );
    assert_eq!(s[&Metric::Instructions].median, 7.0);
}
