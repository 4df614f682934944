//! The tests of `classes`: the defaults, each convention, bad headers, tenants and the file.

use super::*;
use hyper::HeaderMap;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().expect("a header value"));
    }
    h
}

#[test]
fn the_defaults_need_no_file() {
    let c = Classes::default();
    assert_eq!(c.class_of(&HeaderMap::new(), None), Ok(0));
    assert_eq!(
        c.class_of(&headers(&[(OBJECTIVE_HEADER, "critical")]), None),
        Ok(100)
    );
    assert_eq!(c.tenant_of(&HeaderMap::new()), Ok(0));
    assert_eq!(c.weights(), vec![1.0, 1.0]);
    assert_eq!(c.sheddable_waiting(), usize::MAX);
}

#[test]
fn each_convention_in_its_direction_and_the_objective_first() {
    let c = Classes::default();
    let h = headers(&[(PRIORITY_HEADER, "7")]);
    assert_eq!(c.class_of(&h, None), Ok(7), "Dynamo: higher wins");
    assert_eq!(
        c.class_of(&HeaderMap::new(), Some(1)),
        Ok(-1),
        "vLLM: lower wins"
    );
    assert_eq!(c.class_of(&h, Some(1)), Ok(7), "a header before the body");
    let both = headers(&[(OBJECTIVE_HEADER, "sheddable"), (PRIORITY_HEADER, "7")]);
    assert_eq!(c.class_of(&both, None), Ok(-1));
}

#[test]
fn a_bad_header_is_an_error_naming_it() {
    let c = Classes::default();
    let e = c
        .class_of(&headers(&[(OBJECTIVE_HEADER, "gold")]), None)
        .expect_err("unknown");
    assert_eq!(e.header, OBJECTIVE_HEADER);
    assert!(e.reason.contains("critical, sheddable, standard"), "{e}");
    let e = c
        .class_of(&headers(&[(PRIORITY_HEADER, "high")]), None)
        .expect_err("not a number");
    assert_eq!(e.header, PRIORITY_HEADER);
    assert_eq!(
        c.class_of(&HeaderMap::new(), Some(i64::MAX))
            .map_err(|e| e.header),
        Err("priority")
    );
    let long = "x".repeat(MAX_NAME + 1);
    let e = c
        .tenant_of(&headers(&[(TENANT_HEADER, &long)]))
        .expect_err("too long");
    assert_eq!(e.header, TENANT_HEADER);
}

#[test]
fn unnamed_tenants_are_bounded_and_then_share_one() {
    let c = Classes::parse("max_tenants = 4").expect("valid");
    assert!(!c.shared(), "only default and other");
    let a = c.tenant_of(&headers(&[(TENANT_HEADER, "a")])).expect("ok");
    assert!(c.shared(), "a tenant seen: answers are counted for shares");
    let b = c.tenant_of(&headers(&[(TENANT_HEADER, "b")])).expect("ok");
    assert_eq!((a, b), (2, 3));
    assert_eq!(
        c.tenant_of(&headers(&[(TENANT_HEADER, "a")])),
        Ok(2),
        "the same again"
    );
    for id in ["c", "d", "e"] {
        assert_eq!(
            c.tenant_of(&headers(&[(TENANT_HEADER, id)])),
            Ok(1),
            "{id}: other"
        );
    }
    assert_eq!(c.tenant_name(1), OTHER_TENANT);
}

#[test]
fn a_file_names_classes_tenants_weights_and_limits() {
    let c = Classes::parse(
        "default_class = \"batch\"\nsheddable_waiting = 3\n[classes]\nbatch = -2\n[tenants.web]\nweight = 3\n[tenants.nightly]\nmax_requests = 1\n",
    )
    .expect("valid");
    assert_eq!(c.class_of(&HeaderMap::new(), None), Ok(-2));
    assert_eq!(c.sheddable_waiting(), 3);
    let nightly = c
        .tenant_of(&headers(&[(TENANT_HEADER, "nightly")]))
        .expect("ok");
    let web = c
        .tenant_of(&headers(&[(TENANT_HEADER, "web")]))
        .expect("ok");
    assert_eq!(c.weights()[web], 3.0);
    assert_eq!((c.limits()[nightly], c.limits()[web]), (Some(1), None));
}

#[test]
fn a_malformed_file_names_the_field_and_line() {
    for (text, field, line) in [
        ("[tenants.web]\nweight = 0\n", "weight", "line 2"),
        ("[tenants.web]\nwieght = 2\n", "wieght", "line 2"),
        (
            "max_tenants = 8\n[classes]\nurgent = \"high\"\n",
            "urgent",
            "line 3",
        ),
    ] {
        let e = Classes::parse(text).expect_err("invalid").to_string();
        assert!(e.contains(field) && e.contains(line), "{text}: {e}");
    }
    let e = Classes::parse("default_class = \"gold\"")
        .expect_err("invalid")
        .to_string();
    assert!(e.contains("default_class") && e.contains("standard"), "{e}");
}
