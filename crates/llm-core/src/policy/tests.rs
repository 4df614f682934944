//! The policy table's names read and written back, and the lists commands take.

use super::*;

#[test]
fn every_name_parses_back_to_itself() {
    for name in names().chain(ALL.iter().copied()) {
        let spec: RequestPolicySpec = name.parse().expect(name);
        assert_eq!(spec.to_string(), name);
    }
    let noisy: RequestPolicySpec = "sagesched-noise-0.5".parse().expect("noise");
    assert_eq!(noisy.source, PredictionSource::Noisy(0.5));
    assert_eq!(noisy.to_string(), "sagesched-noise-0.5");
}

#[test]
fn parameters_change_admission_and_preemption_and_print_only_when_changed() {
    let s: RequestPolicySpec = "ssjf:admit=peak".parse().expect("ssjf");
    assert_eq!(s.admission, KvAdmission::Peak);
    assert_eq!(s.to_string(), "ssjf:admit=peak");
    let s: RequestPolicySpec = "sagesched:preempt=on,admit=engine".parse().expect("sage");
    assert!(s.preemptive && s.admission == KvAdmission::Engine);
    assert_eq!(s.to_string(), "sagesched:admit=engine,preempt=on");
    assert_eq!(
        "fcfs:admit=engine"
            .parse::<RequestPolicySpec>()
            .map(|s| s.to_string()),
        Ok("fcfs".into())
    );
}

#[test]
fn unknown_names_and_parameters_say_what_is_known() {
    let err = "srpt".parse::<RequestPolicySpec>().expect_err("unknown");
    assert!(
        err.to_string().contains("fcfs, priority, sagesched"),
        "{err}"
    );
    for bad in [
        "sagesched-noise-",
        "sagesched-noise-x",
        "sagesched-noise--1",
    ] {
        assert!(bad.parse::<RequestPolicySpec>().is_err(), "{bad}");
    }
    let err = "fcfs:admit=maybe"
        .parse::<RequestPolicySpec>()
        .expect_err("param");
    assert!(err.to_string().contains("admit=engine|peak"), "{err}");
}

#[test]
fn the_default_list_names_table_rows() {
    assert!(ALL.iter().all(|n| RequestPolicySpec::row(n).is_some()));
    assert_eq!(RequestPolicySpec::FCFS.name, "fcfs");
}

#[test]
fn a_list_is_parsed_in_order_and_all_is_the_default_set() {
    let got = parse_list(&["ssjf:admit=peak", " fcfs"]).expect("list");
    let seen: Vec<_> = got.iter().map(|(n, p)| (*n, p.to_string())).collect();
    assert_eq!(
        seen,
        [
            ("ssjf:admit=peak", "ssjf:admit=peak".to_string()),
            (" fcfs", "fcfs".to_string())
        ]
    );
    let names = ["fcfs".to_string(), "all".to_string()];
    let all = parse_list(&names).expect("all");
    assert!(all.iter().map(|(n, _)| *n).eq(ALL.iter().copied()));
    assert!(all.iter().all(|(n, p)| p.to_string() == *n));
    let err = parse_list(&["fcfs", "srpt"]).expect_err("unknown");
    assert_eq!(err, PolicyError::Unknown("srpt".into()));
}

#[test]
fn predict_model_swaps_a_learned_source_and_is_refused_elsewhere() {
    let s: RequestPolicySpec = "sagesched:predict=model".parse().expect("sage");
    assert_eq!(s.source, PredictionSource::Model);
    assert_eq!(s.to_string(), "sagesched:predict=model");
    let s: RequestPolicySpec = "ssjf:admit=peak,predict=model".parse().expect("ssjf");
    assert_eq!(s.to_string(), "ssjf:admit=peak,predict=model");
    let s: RequestPolicySpec = "sagesched:predict=history".parse().expect("history");
    assert_eq!(s.to_string(), "sagesched");
    for refused in ["fcfs:predict=model", "sagesched-oracle:predict=model"] {
        let err = refused.parse::<RequestPolicySpec>().expect_err(refused);
        assert!(matches!(err, PolicyError::NotLearned(_)), "{err}");
    }
    let err = "sagesched:predict=magic".parse::<RequestPolicySpec>();
    assert!(err.is_err_and(|e| e.to_string().contains("predict=history|model")));
}
