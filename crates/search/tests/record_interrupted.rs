//! An interrupted process appends nothing more to its record log: once the interrupt
//! handler has begun removing the measurement folders (`measure::remove_scratch_dirs`),
//! a batch still being measured fails for want of them, and those failures must not be
//! logged as the candidates'. (A process of its own: the flag is process-wide.)

use tessera_search::measure::{interrupted, remove_scratch_dirs};
use tessera_search::record::{load, Record, RecordWriter};
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc};

fn record(index: u64, error_no: MeasureErrorNo) -> Record {
    let result = MeasureResult {
        costs: vec![1e-3],
        error_no,
        error_msg: None,
        all_cost: 0.5,
        timestamp: 1_700_000_000,
        at_points: None,
    };
    Record::new(
        "[\"0123456789abcdef0123456789abcdef\", [1, 64], [64, 64], [1, 64]]",
        "cpu",
        "dense",
        ScheduleDesc::Config {
            template: "dense_nopack".into(),
            index,
            entity: serde_json::json!({"tile_y": [-1, 8]}),
        },
        result,
    )
}

#[test]
fn nothing_is_appended_once_the_process_is_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.json");
    let mut w = RecordWriter::open(&path).unwrap();
    w.append(&record(0, MeasureErrorNo::NoError)).unwrap();
    assert!(!interrupted());
    remove_scratch_dirs();
    assert!(interrupted());
    // the batch under way, failed because its folders went away
    w.append_batch(&[record(1, MeasureErrorNo::RuntimeDevice)])
        .unwrap();
    let log = load(&path).unwrap();
    assert_eq!(log.records.len(), 1, "{:?}", log.records);
    assert_eq!(log.records[0].result.error_no, MeasureErrorNo::NoError);
}
