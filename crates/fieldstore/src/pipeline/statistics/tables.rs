//! MultIO's parameter tables (generated from its data files; see each file's header): the
//! output param of a statistic, the statistic a param already is, and average-rate's params.

use std::collections::HashMap;
use std::sync::OnceLock;

const STATISTICS_PARAM: &str = include_str!("../tables/statistics_param.txt");
const STATISTICS_OPERATION: &str = include_str!("../tables/statistics_operation.txt");
const AVERAGE_RATE_PARAM: &str = include_str!("../tables/average_rate_param.txt");
const LOCAL_TO_WMO: &str = include_str!("../tables/local_to_wmo.txt");

fn rows(text: &str) -> impl Iterator<Item = Vec<f64>> + '_ {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect()
        })
}

/// (param, typeOfStatisticalProcessing) → output param.
pub fn statistics_param(param: i64, tosp: i64) -> Option<i64> {
    static T: OnceLock<HashMap<(i64, i64), i64>> = OnceLock::new();
    T.get_or_init(|| {
        rows(STATISTICS_PARAM)
            .filter(|r| r.len() == 3)
            .map(|r| ((r[0] as i64, r[1] as i64), r[2] as i64))
            .collect()
    })
    .get(&(param, tosp))
    .copied()
}

/// The statistic a param already is (typeOfStatisticalProcessing), if any.
pub fn param_statistic(param: i64) -> Option<i64> {
    static T: OnceLock<HashMap<i64, i64>> = OnceLock::new();
    T.get_or_init(|| {
        rows(STATISTICS_OPERATION)
            .filter(|r| r.len() == 2)
            .map(|r| (r[0] as i64, r[1] as i64))
            .collect()
    })
    .get(&param)
    .copied()
}

/// average-rate's param for an accumulated param.
pub fn average_rate_param(param: i64) -> Option<i64> {
    static T: OnceLock<HashMap<i64, i64>> = OnceLock::new();
    T.get_or_init(|| {
        rows(AVERAGE_RATE_PARAM)
            .filter(|r| r.len() == 2)
            .map(|r| (r[0] as i64, r[1] as i64))
            .collect()
    })
    .get(&param)
    .copied()
}

/// scale's `local-to-wmo` preset: (param in, param out, factor).
pub fn local_to_wmo() -> Vec<(i64, i64, f64)> {
    rows(LOCAL_TO_WMO)
        .filter(|r| r.len() == 3)
        .map(|r| (r[0] as i64, r[1] as i64, r[2]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_entries() {
        assert_eq!(statistics_param(167, 0), Some(228004));
        assert_eq!(statistics_param(167, 2), Some(237167));
        assert_eq!(statistics_param(167, 3), Some(238167));
        assert_eq!(statistics_param(167, 6), Some(239167));
        assert_eq!(statistics_param(130, 0), Some(235130));
        assert_eq!(statistics_param(207, 0), Some(228005));
        assert_eq!(statistics_param(129, 0), Some(235129));
        assert_eq!(statistics_param(228141, 0), Some(235078));
        assert_eq!(statistics_param(167, 1), None);
        assert_eq!(param_statistic(228228), Some(1));
        assert_eq!(param_statistic(228004), Some(0));
        assert_eq!(average_rate_param(228228), Some(235055));
        assert!(local_to_wmo().iter().any(|r| r.0 == 8 && r.1 == 231010));
    }
}
