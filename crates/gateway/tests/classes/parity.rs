//! Classes through the gateway and through the engine simulator: a classed sequence admitted
//! and evicted alike, and the serving script decided alike.

use crate::support::{
    SCRIPT, SCRIPT_CLASSES, chat, config, get, policy, post, post_with, queueing, reported_waiting,
    runtime, script_decided, script_headers, serve, simulated_decisions, start_engine, until,
};
use crate::{CHAT, CRITICAL, SHEDDABLE, hold, with_classes};
use hyper::StatusCode;
use std::sync::Arc;
use xsched_gateway::GatewayConfig;
use xsched_gateway::classes::Classes;

/// The same classed sequence through the gateway and through the simulator: two sheddable
/// requests hold an engine of two slots, a standard one waits, then two critical ones arrive,
/// each evicting the sheddable request admitted last. Both drivers run the core's eviction, so
/// both admit in the same order and evict the same requests in the same order.
#[test]
fn the_gateway_and_the_simulator_admit_and_evict_a_classed_sequence_alike() {
    use xsched_llm_core::{Eviction, Fairness};
    use xsched_llm_predict::embedding::{Embedder, Hashed};
    use xsched_llm_sim::engine::EngineConfig;
    use xsched_llm_sim::sim::{Cluster, Rules, Runs};

    let names = ["s0", "s1", "s2", "c3", "c4"];
    let (rt, gw, seen) = with_classes("", 2);
    let addr = gw.addr();
    let through_gateway_evicted = rt.block_on(async {
        let s0 = hold(addr, &seen, SHEDDABLE).await;
        let s1 = hold(addr, &seen, SHEDDABLE).await;
        let s2 = tokio::spawn(post(addr, CHAT, chat("s2", 0, false)));
        until("s2 waits", || gw.arrivals() == 3).await;
        let mut evicted = Vec::new();
        // c3 answers for 2 s, so that it still holds its slot when c4 arrives.
        let c3 = tokio::spawn(post_with(addr, CHAT, chat("c3", 2_000, false), CRITICAL));
        let (status, _, _) = s1.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        evicted.push("s1");
        assert!(!s0.is_finished(), "one evicted for c3");
        let c4 = tokio::spawn(post_with(addr, CHAT, chat("c4", 0, false), CRITICAL));
        let (status, _, _) = s0.await.expect("task");
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        evicted.push("s0");
        for t in [c3, c4] {
            assert_eq!(t.await.expect("task").0, StatusCode::OK);
        }
        assert_eq!(s2.await.expect("task").0, StatusCode::OK);
        seen.gate.add_permits(2);
        evicted
    });
    let order = seen.order.lock().expect("order").clone();
    let through_gateway: Vec<&str> = order
        .iter()
        .map(|t| if t == "hold" { "s" } else { t.as_str() })
        .collect();
    // Through the simulator: the sheddable requests answer long, the others briefly.
    let outputs = [2000, 2000, 20, 20, 20];
    let requests: Vec<xsched_llm_sim::Request> = names
        .iter()
        .zip(outputs)
        .enumerate()
        .map(|(id, (name, output_tokens))| xsched_llm_sim::Request {
            id,
            arrival: 0.01 * id as f64,
            prompt: name.to_string(),
            input_tokens: 10,
            output_tokens,
            previous_answer_tokens: None,
            embedding: Hashed.embed(name),
        })
        .collect();
    let cfg = EngineConfig {
        max_num_seqs: 2,
        ..EngineConfig::preset("llama3.1-8b-a100").expect("preset")
    };
    let runs = Runs {
        cfg: &cfg,
        cluster: Cluster::SINGLE,
        history: 100,
        warm: &[],
    };
    let rules = Rules {
        fairness: Fairness::with_eviction(Eviction::One),
        classes: vec![-1, -1, 0, 100, 100],
        ..Rules::default()
    };
    let run = runs
        .simulate(policy("fcfs"), &rules, &requests)
        .expect("run");
    let name = |i: usize| if i < 2 { "s" } else { names[i] };
    let through_simulator: Vec<&str> = run.admitted.iter().map(|&i| name(i)).collect();
    assert_eq!(through_gateway, through_simulator);
    assert_eq!(through_gateway, ["s", "s", "c3", "c4", "s2"]);
    let evicted: Vec<&str> = run.evicted.iter().map(|&i| names[i]).collect();
    assert_eq!(through_gateway_evicted, evicted);
}

/// The serving script (`support::SCRIPT`) through the gateway: engine A's metrics say it
/// queues, so the first request goes to B and the rest wait or are refused for the core's
/// reasons (a tenant at its limit, a sheddable request displaced from the full queue, the full
/// queue); A's metrics clear and the waiting requests go there. The same decisions as the
/// simulator's, fed the same scrapes (and the endpoint picker's, in `epp/parity.rs`).
#[test]
fn the_gateway_and_the_simulator_decide_the_serving_script_alike() {
    let rt = runtime();
    let (a, seen_a) = start_engine(&rt);
    let (b, seen_b) = start_engine(&rt);
    *seen_a.metrics.lock().expect("page") = queueing(1);
    *seen_b.metrics.lock().expect("page") = queueing(0);
    let gw = serve(GatewayConfig {
        classes: Arc::new(Classes::parse(SCRIPT_CLASSES).expect("valid")),
        max_waiting: 2,
        scrape: Some(std::time::Duration::from_millis(20)),
        ..config(&[a, b], 1)
    });
    let addr = gw.addr();
    let refused = rt.block_on(async {
        let page =
            || async { String::from_utf8_lossy(&get(addr, "/metrics").await.1).into_owned() };
        while !reported_waiting(&page().await, a, 1) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let mut tasks = Vec::new();
        for (tag, tenant, class) in SCRIPT {
            let headers = script_headers(tenant, class);
            let before = gw.arrivals();
            let task = tokio::spawn(async move {
                let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                post_with(addr, CHAT, chat(tag, 0, false), &h).await
            });
            // Settled: refused at once, or counted (waiting or admitted).
            until(tag, || task.is_finished() || gw.arrivals() > before).await;
            if tag == "hold" {
                until("hold on its engine", || {
                    seen_b.order.lock().expect("o").len() == 1
                })
                .await;
            }
            tasks.push((tag, task));
        }
        *seen_a.metrics.lock().expect("page") = queueing(0);
        until("two served on A", || {
            seen_a.order.lock().expect("o").len() == 2
        })
        .await;
        seen_b.gate.add_permits(1);
        let mut refused = Vec::new();
        for (tag, task) in tasks {
            let (status, headers, _) = task.await.expect("task");
            if let Some(reason) = headers.get(xsched_gateway::error::SHED_REASON) {
                let reason = reason.to_str().expect("ascii").to_string();
                refused.push((tag.to_string(), reason));
            } else {
                assert_eq!(status, StatusCode::OK, "{tag}");
            }
        }
        refused
    });
    let mut decided: std::collections::BTreeMap<String, String> = refused.into_iter().collect();
    for (engine, seen) in [("A", &seen_a), ("B", &seen_b)] {
        for tag in seen.order.lock().expect("order").iter() {
            decided.insert(tag.clone(), engine.to_string());
        }
    }
    assert_eq!(decided, simulated_decisions());
    assert_eq!(decided, script_decided());
}
